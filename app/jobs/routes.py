"""/train and /jobs routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status
from fastapi.responses import JSONResponse

from app.deps import SessionDep
from app.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.jobs import service
from app.jobs.schemas import JobAttemptOut, JobDetail, JobOut, JobPage, JobStatus, TrainRequest
from app.pagination import PageDep
from app.problems import problem_responses

router = APIRouter(tags=["jobs"])

_TRAIN_EXAMPLES = {
    "linear with hold-out": {
        "summary": "Linear MSVMAv, 20 % hold-out",
        "value": {
            "dataset_id": 1,
            "kernel": "linear",
            "alpha": 16,
            "beta": 0.25,
            "test_fraction": 0.2,
            "seed": 0,
        },
    },
    "rbf": {
        "summary": "Gaussian kernel, exact",
        "value": {"dataset_id": 1, "kernel": "rbf", "gamma": 0.5, "approximation": "exact"},
    },
    "svm": {
        "summary": "A comparator: linear SVM with C = 4",
        "value": {
            "dataset_id": 1,
            "algorithm": "svm",
            "params": {"C": 4},
            "test_fraction": 0.2,
            "seed": 0,
        },
    },
    "odm": {
        "summary": "ODM, Gaussian kernel",
        "value": {
            "dataset_id": 1,
            "algorithm": "odm",
            "kernel": "rbf",
            "params": {"C": 1, "mu": 0.8, "theta": 0.2},
        },
    },
    "search": {
        "summary": "MSVMAv, alpha and beta chosen by 5-fold CV",
        "value": {
            "dataset_id": 1,
            "search": {"grid": {"alpha": [1, 16], "beta": [0.25, 1]}, "cv": 5, "seed": 0},
            "test_fraction": 0.2,
        },
    },
    "search quick": {
        "summary": "SVM, C from the quick grid by 5-fold CV",
        "value": {"dataset_id": 1, "algorithm": "svm", "search": {"grid": "quick"}},
    },
}


@router.post(
    "/train",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Start a training job",
    description=(
        "Validates the algorithm and its hyper-parameters and queues a `train` job; a worker "
        "fits it — after a k-fold cross-validated grid search on the (scaled) training part "
        "when `search` is given, the job's progress then counting grid cells. "
        "Answers 202 with `Location: /jobs/{id}`; poll that until `status` is `succeeded` "
        "(then `model_id` is set), `failed` or `cancelled`."
    ),
    response_model=JobOut,
    responses={
        202: {
            "description": "Job queued",
            "headers": {
                "Location": {"description": "/jobs/{id}", "schema": {"type": "string"}},
                **REPLAYED_RESPONSE_HEADER,
            },
        },
        **problem_responses(422),
    },
)
def create_train_job(
    session: SessionDep,
    http_request: Request,
    request: Annotated[TrainRequest, Body(openapi_examples=_TRAIN_EXAMPLES)],
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    def create() -> Created:
        job = service.submit_train(
            session, request, max_fit_bytes=http_request.app.state.settings.max_fit_bytes
        )
        body = JobOut.model_validate(job).model_dump(mode="json")
        return Created(status.HTTP_202_ACCEPTED, body, f"/jobs/{job.id}")

    payload = request.model_dump(mode="json")
    return create_once(session, http_request, idempotency_key, payload, create)


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
