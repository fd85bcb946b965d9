"""The jobs' tables: a unit of background work and each claim of it by a worker."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
ACTIVE_JOB_STATUSES = ("queued", "running")


class Job(Base):
    """A unit of background work. ``kind`` selects the runner in ``app.jobs.worker``; ``params`` and
    ``result`` are free-form JSON so other kinds (grid search, experiments) fit the same table."""

    __tablename__ = "jobs"
    __table_args__ = (
        # Migration 0001 spells this out; a new status needs a migration.
        CheckConstraint(
            "status IN (" + ", ".join(f"'{s}'" for s in JOB_STATUSES) + ")", name="status"
        ),
        Index("ix_jobs_status_id", "status", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    model_id: Mapped[int | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    worker_id: Mapped[str | None] = mapped_column(String(255))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


#: What became of one claim of a job (``JobAttempt.outcome``, and the API's
#: ``JobAttemptOut.outcome``); no CHECK constraint enforces it in the database.
JobAttemptOutcome = Literal["running", "succeeded", "failed", "cancelled", "requeued", "lost"]


class JobAttempt(Base):
    """One claim of a job by a worker: ``number`` counts the job's claims from 1 (it equals
    ``jobs.attempts`` when made). ``outcome``: running, then succeeded / failed / cancelled,
    ``requeued`` (its worker shut down and put the job back) or ``lost`` (its worker stopped
    heartbeating: lease expired; or ``msvmav serve`` saw its embedded worker die)."""

    __tablename__ = "job_attempts"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker_id: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    outcome: Mapped[str] = mapped_column(String(16), default="running")
