"""The leaderboard's routes: ``GET /datasets/{dataset_id}/leaderboard`` (a dataset's newest
models, binary costs in the query) and ``POST /models/leaderboard`` (a list of references, or a
dataset, with any cost rule). Both only read, like /predict: a read key is enough."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from app.core.deps import SessionDep
from app.core.problems import problem_responses
from app.predict import leaderboard
from app.predict.leaderboard_schemas import (
    COST_FN_DOC,
    COST_FP_DOC,
    DEFAULT_MODELS,
    MAX_MODELS,
    METRIC_DOC,
    LeaderboardOut,
    LeaderboardRequest,
    MetricName,
)
from app.predict.threshold_schemas import MAX_COST
from app.registry.references import BARE_NAME

router = APIRouter(tags=["models"])
#: POST /models/leaderboard: a part of the /models router (app.routers.MODEL_PARTS).
models_router = APIRouter(tags=["models"])

_DOC = (
    "The models side by side on the rows that are in **every** model's hold-out "
    "(`holdout.rows` of the model detail: rows none of them trained on): accuracy, balanced "
    "accuracy, ROC AUC and PR AUC (from the decision values; multi-class: macro one-vs-rest), "
    "log loss and expected calibration error (calibrated models; null with the reason in "
    "`notes` otherwise), and the expected cost per row of the labels each model serves under "
    "the cost rule given; each as sklearn.metrics computes it, as `POST "
    "/models/{model_ref}/evaluate` does. The best by `metric` are marked (`best`, `rank`). "
    "Models of different datasets, or whose hold-outs share no row, are not compared "
    "(`comparable: false` and the `reason`); a model that kept no hold-out is listed in "
    "`excluded` with the reason. "
)
_EXAMPLES = {
    "references": {
        "summary": "References (ids or name@alias), at a 5:1 cost",
        "value": {"models": ["wdbc@production"], "metric": "expected_cost",
                  "cost_fp": 5, "cost_fn": 1},
    },
    "dataset": {
        "summary": "A dataset's newest models by ROC AUC",
        "value": {"dataset_id": 1, "metric": "roc_auc", "limit": 10},
    },
    "matrix": {
        "summary": "A cost matrix (row: true class, column: served label)",
        "value": {"dataset_id": 1, "metric": "expected_cost", "cost_matrix": [[0, 5], [1, 0]]},
    },
}


@router.get(
    "/datasets/{dataset_id}/leaderboard",
    summary="Compare a dataset's models",
    description=_DOC + f"The dataset's newest `limit` models (at most {MAX_MODELS}; "
    "`truncated` says when it has more). Binary costs here; a cost matrix: `POST "
    "/models/leaderboard` with `dataset_id`.",
    response_model=LeaderboardOut,
    responses=problem_responses(404, 422),
)
def dataset_leaderboard(
    session: SessionDep,
    dataset_id: int,
    metric: Annotated[MetricName, Query(description=METRIC_DOC)] = "roc_auc",
    cost_fp: Annotated[
        float | None, Query(ge=0, le=MAX_COST, allow_inf_nan=False, description=COST_FP_DOC)
    ] = None,
    cost_fn: Annotated[
        float | None, Query(ge=0, le=MAX_COST, allow_inf_nan=False, description=COST_FN_DOC)
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_MODELS, description="How many of the newest models")
    ] = DEFAULT_MODELS,
) -> LeaderboardOut:
    request = LeaderboardRequest(dataset_id=dataset_id, metric=metric, cost_fp=cost_fp,
                                 cost_fn=cost_fn, limit=limit)
    return LeaderboardOut.model_validate(leaderboard.leaderboard(session, request, "query"))


@models_router.post(
    "/leaderboard",
    summary="Compare models",
    description=_DOC + f"`models`: up to {MAX_MODELS} ids or registry references (a bare "
    f"name: {BARE_NAME}); or `dataset_id` for a dataset's newest `limit` models.",
    response_model=LeaderboardOut,
    responses=problem_responses(404, 422),
)
def models_leaderboard(
    session: SessionDep,
    request: Annotated[LeaderboardRequest, Body(openapi_examples=_EXAMPLES)],
) -> LeaderboardOut:
    return LeaderboardOut.model_validate(leaderboard.leaderboard(session, request, "body"))
