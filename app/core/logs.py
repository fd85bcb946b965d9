"""Logging with the request id on every line (key=value format, one event per line)."""

from __future__ import annotations

import logging
from contextvars import ContextVar

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

LOG_FORMAT = (
    "ts=%(asctime)s level=%(levelname)s logger=%(name)s request_id=%(request_id)s %(message)s"
)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get() or "-"
        return True


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's own access log lacks the request id; ours (app.access) replaces it.
    logging.getLogger("uvicorn.access").disabled = True
    # Alembic announces its context on every /readyz check; upgrades are logged by app.core.db.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)
