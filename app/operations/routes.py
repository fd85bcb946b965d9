"""Operational endpoints: /livez, /readyz (open), /metrics (a key of scope read when keys are
required)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError

from app.core.db import current_heads, ping
from app.core.deps import SessionDep
from app.core.problems import Problem, problem_responses
from app.jobs.gauges import job_lines

router = APIRouter(tags=["operations"])
# Apart from the probes so that app.main can require a key for it (scope read).
metrics_router = APIRouter(tags=["operations"])


class Health(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "status": "ok",
                    "database": "ok",
                    "migrations": "0001",
                    "workers": "1 of 1 embedded workers running",
                }
            ]
        }
    )

    status: str
    database: str | None = None
    migrations: str | None = None
    workers: str | None = Field(
        None,
        description="`msvmav serve --workers N` (N > 0): its embedded workers' state; absent "
        "when it runs none (the workers are separate processes)",
    )


@router.get(
    "/livez",
    summary="Liveness: the process is up",
    response_model=Health,
    response_model_exclude={"workers"},  # /readyz's check: liveness asks nothing of them
)
async def livez() -> Health:
    """On the event loop (no I/O): it answers while every thread of the pool is busy.
    ``{"status": "ok", "database": null, "migrations": null}``: liveness checks neither."""
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="Readiness: database reachable and migrated to head, embedded workers running",
    response_model=Health,
    response_model_exclude_none=True,
    responses=problem_responses(503),
)
def readyz(request: Request) -> Health:
    """503 while the database is unreachable or behind the code's migrations, or while an
    embedded worker of ``msvmav serve`` is dead (until its replacement polls the queue)."""
    engine = request.app.state.engine
    expected: set[str] = request.app.state.migration_heads
    try:
        ping(engine)
        current = current_heads(engine)
    except SQLAlchemyError as exc:
        raise Problem(503, f"database unreachable: {type(exc).__name__}") from None
    if current != expected:
        raise Problem(
            503,
            f"database schema at {sorted(current) or 'no revision'}, expected "
            f"{sorted(expected)}: run `msvmav migrate`",
        )
    workers = None
    # (ok, line) of each check msvmav serve adds: its embedded workers (app.cli.supervisor)
    checks: list[Callable[[], tuple[bool, str]]] = getattr(
        request.app.state, "readiness_checks", []
    )
    for check in checks:
        ok, workers = check()
        if not ok:
            raise Problem(503, workers)
    return Health(
        status="ok", database="ok", migrations=",".join(sorted(current)), workers=workers
    )


@metrics_router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"example": 'msvmav_jobs{status="queued"} 0\n'}}}},
)
def metrics(request: Request, session: SessionDep) -> PlainTextResponse:
    lines = request.app.state.metrics.render()
    for source in getattr(request.app.state, "metric_sources", ()):  # (app.main's list)
        lines += source()
    try:
        lines += job_lines(session)
    except SQLAlchemyError:
        lines.append("# msvmav_jobs unavailable: database error")
    return PlainTextResponse(
        "\n".join(lines) + "\n", media_type="text/plain; version=0.0.4; charset=utf-8"
    )
