"""Job data functions: enqueue, read, list, cancel. Each kind's submission checks live with
its domain (``app.training.service``, ``app.experiments.service``); claiming and leases in
app.jobs.queue, running in app.jobs.worker."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.orm import utcnow
from app.core.pagination import PageParams, paginate
from app.core.problems import conflict, not_found
from app.jobs.orm import Job, JobAttempt
from app.jobs.wakeup import announce


def get_or_raise(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise not_found("job", job_id)
    return job


def attempts(session: Session, job_id: int) -> list[JobAttempt]:
    """The job's attempts, oldest first."""
    return list(
        session.scalars(
            select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(JobAttempt.number)
        )
    )


def list_page(
    session: Session, page: PageParams, status: str | None = None
) -> tuple[list[Job], str | None]:
    stmt = select(Job)
    if status is not None:
        stmt = stmt.where(Job.status == status)
    return paginate(session, stmt, Job.id, page)


def enqueue(session: Session, *, kind: str, params: dict[str, Any], dataset_id: int | None
            ) -> Job:
    """Add a new queued job of ``kind``, flushed, not committed (the commit rule:
    ``app.core.deps.get_session``); ``params`` is the JSON of the kind's params model (see
    app.jobs.kinds), validated by the caller, as are dataset locks. Idle workers are told at
    the commit (``app.jobs.wakeup``)."""
    job = Job(
        kind=kind,
        status="queued",
        params=params,
        dataset_id=dataset_id,
        progress=0.0,
        message="queued",
        cancel_requested=False,
        attempts=0,
    )
    session.add(job)
    session.flush()
    announce(session)
    return job


def cancel(session: Session, job_id: int) -> tuple[Job, bool]:
    """A queued job is cancelled at once; a running one gets its cancel flag set and its worker
    stops it within one iteration. Cancelling a cancelled job is a no-op; a finished one, 409.

    Returns the job and whether a running job was asked to stop (its worker may already have
    stopped it by the time the job is read back)."""
    job = get_or_raise(session, job_id)
    if job.status == "queued":
        done = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(
                status="cancelled",
                cancel_requested=True,
                finished_at=utcnow(),
                message="cancelled before it started",
            )
        ).rowcount
        if done:
            session.commit()
            session.refresh(job)
            return job, False
        session.rollback()  # a worker claimed it meanwhile: cancel it as a running job
        session.refresh(job)
    if job.status == "running":
        requested = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running")
            .values(cancel_requested=True)
        ).rowcount
        session.commit()
        session.refresh(job)
        if requested or job.status == "cancelled":
            return job, bool(requested)
    if job.status == "cancelled":
        return job, False
    raise conflict(
        f"job {job_id} already {job.status}; only queued or running jobs can be cancelled"
    )
