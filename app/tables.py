"""Every table of the service: each domain's ``orm`` module, imported so that ``Base.metadata``
holds them all (Alembic's ``migrations/env.py``, the tests' create and drop, the command line).
A domain's table is declared in that domain; this module only gathers them."""

from __future__ import annotations

import app.alerts.orm
import app.auth.orm
import app.batch.orm
import app.datasets.orm
import app.experiments.orm
import app.jobs.orm
import app.loop.orm
import app.models.orm
import app.monitoring.orm
import app.registry.orm
import app.webhooks.orm
from app.core.orm import Base

DOMAIN_TABLE_MODULES = (
    app.auth.orm, app.batch.orm, app.datasets.orm, app.experiments.orm, app.jobs.orm,
    app.models.orm, app.monitoring.orm, app.registry.orm, app.alerts.orm, app.webhooks.orm,
    app.loop.orm,
)

metadata = Base.metadata

__all__ = ["Base", "DOMAIN_TABLE_MODULES", "metadata"]
