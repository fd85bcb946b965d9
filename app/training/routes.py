"""POST /train: queue a training job (the worker runs ``app.training.runner``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, status
from fastapi.responses import JSONResponse

from app.core.deps import SessionDep
from app.core.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.core.problems import problem_responses
from app.jobs.schemas import JobOut
from app.training import service
from app.training.schemas import TrainRequest

# Tagged with the job routes: /train answers with a job.
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
        settings = http_request.app.state.settings
        job = service.submit_train(
            session,
            request,
            max_fit_bytes=settings.max_fit_bytes,
            max_fit_seconds=settings.max_fit_seconds,
            settings=settings,
        )
        body = JobOut.model_validate(job).model_dump(mode="json")
        return Created(status.HTTP_202_ACCEPTED, body, f"/jobs/{job.id}")

    payload = request.model_dump(mode="json")
    return create_once(session, http_request, idempotency_key, payload, create)
