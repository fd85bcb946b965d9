"""/jobs routes: read, list, cancel and delete background jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.core.deps import SessionDep
from app.core.pagination import PageDep
from app.core.problems import problem_responses
from app.jobs import service
from app.jobs.schemas import JobAttemptOut, JobDetail, JobOut, JobPage, JobStatus

router = APIRouter(tags=["jobs"])

@router.get(
    "/jobs",
    summary="List jobs",
    description="Newest first; optionally only those with one `status`.",
    response_model=JobPage,
    responses=problem_responses(422),
)
def list_jobs(
    session: SessionDep,
    page: PageDep,
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status")] = None,
) -> JobPage:
    return JobPage.of(service.list_page(session, page, status), JobOut.model_validate)


@router.get(
    "/jobs/{job_id}",
    summary="Get a job",
    description=(
        "The job, its progress and `attempt_history`: each claim by a worker with its start, "
        "end and outcome. A job whose worker is killed or frozen is re-queued once its lease "
        "expires (MSVMAV_LEASE_SECONDS) and claimed again, up to MSVMAV_MAX_ATTEMPTS lost "
        "workers; then it fails."
    ),
    response_model=JobDetail,
    responses=problem_responses(404),
)
def get_job(session: SessionDep, job_id: int) -> JobDetail:
    job = JobOut.model_validate(service.get_or_raise(session, job_id))
    history = [JobAttemptOut.model_validate(a) for a in service.attempts(session, job_id)]
    return JobDetail(**job.model_dump(), attempt_history=history)


@router.post(
    "/jobs/{job_id}/cancel",
    summary="Cancel a job",
    description=(
        "A queued job ends `cancelled` at once (200). A running job gets `cancel_requested` "
        "and its worker stops it within one iteration (202; poll the job). "
        "409 when the job already succeeded or failed."
    ),
    response_model=JobOut,
    responses={
        202: {"description": "Cancellation requested", "model": JobOut},
        **problem_responses(404, 409),
    },
)
def cancel_job(session: SessionDep, response: Response, job_id: int) -> JobOut:
    job, requested = service.cancel(session, job_id)
    if requested:
        response.status_code = status.HTTP_202_ACCEPTED
    return JobOut.model_validate(job)
