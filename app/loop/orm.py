"""The loop's table: one retraining policy per registered model, with the state the API
processes' evaluators share through it (``app.loop.policies``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow


class RetrainPolicy(Base):
    """``config``: the policy as given (app.loop.schemas.PolicyConfig); ``state``: where its
    cycle stands (phase, the retraining job, the challenger, the promotion under probation,
    the last decision and its evidence); ``evaluated_until``: the last round claimed (a
    conditional UPDATE, so that one process evaluates each round)."""

    __tablename__ = "retrain_policies"

    registered_model_id: Mapped[int] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True
    )
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    evaluated_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
