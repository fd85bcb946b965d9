"""Job data functions: submit, read, list, cancel. Claiming and running live in app.worker."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.datasets import service as datasets
from app.jobs.schemas import TrainRequest
from app.orm import Job, utcnow
from app.pagination import PageParams, paginate
from app.problems import conflict, invalid, not_found
from app.training import holdout_sizes


def get_or_raise(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise not_found("job", job_id)
    return job


def list_page(
    session: Session, page: PageParams, status: str | None = None
) -> tuple[list[Job], str | None]:
    stmt = select(Job)
    if status is not None:
        stmt = stmt.where(Job.status == status)
    return paginate(session, stmt, Job.id, page)


def submit_train(session: Session, request: TrainRequest) -> Job:
    """Queue a training job after checking what can be checked without fitting."""
    dataset = datasets.get(session, request.dataset_id)
    if dataset is None:
        raise invalid(["body", "dataset_id"], f"dataset {request.dataset_id} not found")
    if len(dataset.classes) < 2:
        raise invalid(
            ["body", "dataset_id"],
            f"the dataset has one class ({dataset.classes[0]!r}); training needs at least two"
            if dataset.classes
            else "the dataset has no labels",
        )
    if request.test_fraction is not None:
        n_train, n_test = holdout_sizes(dataset.n_rows, request.test_fraction)
        if n_test < 1 or n_train < 2:
            raise invalid(
                ["body", "test_fraction"],
                f"test_fraction {request.test_fraction} of {dataset.n_rows} rows leaves "
                f"{n_train} for training and {n_test} for testing",
            )
    job = Job(
        kind="train",
        status="queued",
        params=request.model_dump(mode="json"),
        dataset_id=dataset.id,
        progress=0.0,
        message="queued",
        cancel_requested=False,
        attempts=0,
    )
    session.add(job)
    session.commit()
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
