"""/feedback and the monitoring report routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request

from app.core.deps import SessionDep, SettingsDep
from app.core.problems import problem_responses
from app.monitoring import feedback, report
from app.monitoring import log as prediction_log
from app.monitoring.schemas import FeedbackOut, FeedbackRequest, MonitoringReport

router = APIRouter(tags=["monitoring"])

_FEEDBACK_EXAMPLES = {
    "by id": {
        "summary": "The true class of the README's prediction `patient-17` (model 1: wdbc)",
        "value": {"model_id": 1, "ids": ["patient-17"], "labels": [2]},
    },
}


@router.post(
    "/feedback",
    summary="Give true labels of earlier predictions",
    description=(
        "Joins each true label to the logged prediction with that id (the `id` /predict "
        "answered) of the model; labels must be among the model's classes (422 naming the "
        "row). The join is by the model the ids were predicted with."
    ),
    response_model=FeedbackOut,
    responses=problem_responses(404, 413, 422),
)
def post_feedback(
    http: Request,
    session: SessionDep,
    settings: SettingsDep,
    body: Annotated[FeedbackRequest, Body(openapi_examples=_FEEDBACK_EXAMPLES)],
) -> dict[str, Any]:
    return feedback.record_feedback(session, http.app.state.engine, body, settings)


@router.get(
    "/models/{model_id}/monitoring",
    summary="A model's monitoring report",
    description=(
        "The training part's decision values (reference) against the logged ones in the "
        "window (live), their Kolmogorov-Smirnov drift (p-value < 0.01: drifted), and the "
        "accuracy and margin statistics of the logged rows with feedback (docs/monitoring.md)."
    ),
    response_model=MonitoringReport,
    responses=problem_responses(404, 422),
)
def get_model_monitoring(
    http: Request,
    session: SessionDep,
    settings: SettingsDep,
    model_id: int,  # (checked by app.core.ids.check_ids, as every path id)
    since: Annotated[
        datetime | None, Query(description="Window start, ISO 8601 (inclusive)")
    ] = None,
    until: Annotated[datetime | None, Query(description="Window end, ISO 8601 (exclusive)")] = None,
) -> dict[str, Any]:
    writer = prediction_log.writer(http.app.state.engine, settings)
    return report.model_report(session, model_id, since, until, writer)
