"""/experiments routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status
from fastapi.responses import JSONResponse

from app.core.deps import SessionDep
from app.core.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.core.pagination import PageDep
from app.core.plotting import IMAGE_TYPES, add_image_routes
from app.core.problems import problem_responses
from app.experiments import service
from app.experiments.schemas import (
    REQUEST_EXAMPLE,
    ExperimentOut,
    ExperimentPage,
    ExperimentRequest,
)

router = APIRouter(prefix="/experiments", tags=["experiments"])

_EXAMPLES = {
    "quick linear": {
        "summary": "Four algorithms, 5 splits, quick grids (a minute on wdbc)",
        "value": REQUEST_EXAMPLE,
    },
    "paper protocol": {
        "summary": "All seven algorithms, 30 splits, the paper's grids (long)",
        "value": {"dataset_ids": [1], "kernel": "linear", "splits": 30, "grid": "paper"},
    },
    "explicit grids": {
        "summary": "Small explicit grids per algorithm (others use quick)",
        "value": {
            "dataset_ids": [1],
            "algorithms": ["msvmav", "svm"],
            "splits": 3,
            "grid": {"msvmav": {"alpha": [1, 16], "beta": [0.25, 1]}, "svm": {"C": [0.25, 4]}},
            "cv": 3,
        },
    },
}

_DATASET_QUERY = Query(
    description="Which of the experiment's data sets (default: the first)", examples=[1]
)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Start an experiment (the paper's Table 1 protocol)",
    description=(
        "Queues a job of kind `experiment`: for each data set, `splits` random train/test "
        "partitions; on each, min-max scaling fitted on the training part, `cv`-fold "
        "cross-validation over the grid of each algorithm, refit of the best configuration, "
        "test accuracy; then mean ± std per algorithm and a paired two-sided t-test of each "
        "algorithm against MSVMAv (95 %). Answers 202 with `Location: /jobs/{id}`; the job's "
        "progress counts fits (CV cells and refits) over data sets × splits. Cancel with "
        "`POST /jobs/{id}/cancel`."
    ),
    response_model=ExperimentOut,
    responses={
        202: {
            "description": "Experiment queued",
            "headers": {
                "Location": {"description": "/jobs/{id}", "schema": {"type": "string"}},
                **REPLAYED_RESPONSE_HEADER,
            },
        },
        **problem_responses(422),
    },
)
def create_experiment(
    session: SessionDep,
    http_request: Request,
    request: Annotated[ExperimentRequest, Body(openapi_examples=_EXAMPLES)],
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    def create() -> Created:
        job = service.submit(session, request)
        body = service.detail_out(session, job).model_dump(mode="json")
        return Created(status.HTTP_202_ACCEPTED, body, f"/jobs/{job.id}")

    payload = request.model_dump(mode="json")
    return create_once(session, http_request, idempotency_key, payload, create)


@router.get(
    "",
    summary="List experiments",
    description="Newest first, `limit` per page; follow `next_cursor` for the next page.",
    response_model=ExperimentPage,
    responses=problem_responses(422),
)
def list_experiments(session: SessionDep, page: PageDep) -> ExperimentPage:
    return ExperimentPage.of(service.list_page(session, page), service.summary_out)


@router.get(
    "/{experiment_id}",
    summary="Get an experiment",
    description="Status and progress; once succeeded, the full result per data set.",
    response_model=ExperimentOut,
    responses=problem_responses(404),
)
def get_experiment(session: SessionDep, experiment_id: int) -> ExperimentOut:
    return service.detail_out(session, service.get_or_raise(session, experiment_id))


@router.get(
    "/{experiment_id}/table.md",
    summary="Table 1 as Markdown",
    description=(
        "Rows = data sets, columns = algorithms, cells `mean±std` with ● (MSVMAv significantly "
        "better) or ○ (significantly worse); a last row counts MSVMAv's win/tie/loss."
    ),
    response_class=Response,
    responses={
        200: {
            "content": {
                "text/markdown": {
                    "example": "| dataset | MSVMAv | SVM |\n|---|---|---|\n"
                    "| wdbc | 0.9684±0.0080 | 0.9614±0.0110 ● |\n"
                }
            }
        },
        **problem_responses(404, 409),
    },
)
def get_experiment_table_markdown(session: SessionDep, experiment_id: int) -> Response:
    text = service.table(session, experiment_id, "markdown")  # cells escaped: no live HTML
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={"X-Content-Type-Options": "nosniff"},  # never guessed to be HTML
    )


@router.get(
    "/{experiment_id}/table.csv",
    summary="Table 1 as CSV",
    description=(
        "Columns dataset, MSVMAv_mean, MSVMAv_std, SVM_mean, SVM_std, SVM_vs_MSVMAv "
        "(MSVMAv_significantly_better / MSVMAv_significantly_worse / tie), …; a last "
        "`win/tie/loss` row."
    ),
    response_class=Response,
    responses={
        200: {
            "content": {
                "text/csv": {
                    "example": "dataset,MSVMAv_mean,MSVMAv_std,SVM_mean,"
                    "SVM_std,SVM_vs_MSVMAv\nwdbc,0.9684,0.0080,0.9614,"
                    "0.0110,MSVMAv_significantly_better\n"
                }
            }
        },
        **problem_responses(404, 409),
    },
)
def get_experiment_table_csv(session: SessionDep, experiment_id: int) -> Response:
    text = service.table(session, experiment_id, "csv")
    return Response(text, media_type="text/csv; charset=utf-8")


def _experiment_margins_image(fmt: str):
    def handler(
        session: SessionDep,
        experiment_id: int,
        dataset_id: Annotated[int | None, _DATASET_QUERY] = None,
    ) -> Response:
        data = service.margins_plot(session, experiment_id, dataset_id, fmt)
        return Response(data, media_type=IMAGE_TYPES[fmt])

    return handler


add_image_routes(
    router,
    "/{experiment_id}/margins",
    _experiment_margins_image,
    name="get_experiment_margins",
    summary="Margin distributions of an experiment's models",
    description=(
        "The paper's Figure 1: the cumulative distribution of the normalised margins "
        "y·f(x) / max|y·f(x)| of every algorithm's model on the test part of the first split."
    ),
    errors=(404, 409, 422),
)
