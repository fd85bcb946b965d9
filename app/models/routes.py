"""The stored models' own operations: a part of the ``/models`` router (``app.routers``,
which declares the prefix and the order of every part)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from app.core.deps import SessionDep
from app.core.pagination import PageDep
from app.core.plotting import IMAGE_TYPES, add_image_routes
from app.core.problems import problem_responses
from app.models import service
from app.models.schemas import AlgorithmName, MarginsOut, ModelDetail, ModelPage, ModelSummary

router = APIRouter(tags=["models"])  # under /models (app.routers.MODEL_PARTS)

_DatasetIdQuery = Annotated[
    int | None, Query(description="Compute on this dataset instead", examples=[1])
]
_Split = Literal["train", "holdout"]


@router.get(
    "",
    summary="List models",
    description="Newest first, `limit` per page; follow `next_cursor` for the next page. "
    "Filters: `dataset_id`, `algorithm`, `registered_model` (its versions).",
    response_model=ModelPage,
    responses=problem_responses(422),
)
def list_models(
    session: SessionDep,
    page: PageDep,
    dataset_id: Annotated[
        int | None, Query(description="Only models trained on this dataset", examples=[1])
    ] = None,
    algorithm: Annotated[
        AlgorithmName | None, Query(description="Only models of this algorithm")
    ] = None,
    registered_model: Annotated[
        str | None,
        Query(max_length=100, description="Only models that are versions of this registered model"),
    ] = None,
) -> ModelPage:
    rows = service.list_page(
        session,
        page,
        dataset_id=dataset_id,
        algorithm=algorithm,
        registered_model=registered_model,
    )
    return ModelPage.of(rows, ModelSummary.model_validate)


@router.get(
    "/{model_id}",
    summary="Get a model",
    response_model=ModelDetail,
    responses=problem_responses(404),
)
def get_model(session: SessionDep, model_id: int) -> ModelDetail:
    return ModelDetail.from_row(service.get_or_raise(session, model_id))


@router.delete(
    "/{model_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a model",
    responses=problem_responses(404, 409),
)
def delete_model(session: SessionDep, model_id: int) -> Response:
    service.delete(session, model_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{model_id}/margins",
    summary="Margin distribution of a model",
    description=(
        "Statistics, histogram and CDF of the margins y·f(x) (multi-class: f_y − max_{j≠y} f_j). "
        "Default: on the model's training part (computed at fit time); `split=holdout` for the "
        "hold-out part; `dataset_id` to compute them on every row of another stored dataset "
        "with the same features."
    ),
    response_model=MarginsOut,
    responses=problem_responses(404, 422),
)
def get_model_margins(
    session: SessionDep,
    model_id: int,
    dataset_id: _DatasetIdQuery = None,
    split: Annotated[_Split, Query(description="Stored statistics to return")] = "train",
) -> MarginsOut:
    return service.model_margins(session, model_id=model_id, dataset_id=dataset_id, split=split)


def _model_margins_image(fmt: str):
    def handler(
        session: SessionDep,
        model_id: int,
        dataset_id: _DatasetIdQuery = None,
        split: Annotated[_Split, Query(description="Stored margins to plot")] = "train",
    ) -> Response:
        data = service.model_margins_plot(session, model_id, dataset_id, split, fmt)
        return Response(data, media_type=IMAGE_TYPES[fmt])

    return handler


add_image_routes(
    router,
    "/{model_id}/margins",
    _model_margins_image,
    name="get_model_margins",
    summary="Margin distribution of a model",
    description=(
        "The cumulative distribution of the model's margins y·f(x), divided by their largest "
        "|y·f(x)| (the paper's Figure 1 for one model). Same choice of rows as `/margins`: the "
        "training part (default), `split=holdout`, or every row of `dataset_id`."
    ),
    errors=(404, 422),
)
