"""/feedback and the monitoring report routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, NamedTuple

from fastapi import APIRouter, Body, Depends, Query, Response, status
from sqlalchemy.orm import Session

from app.core.deps import RuntimeDep, SessionDep, SettingsDep
from app.core.plotting import image_response_doc
from app.core.problems import invalid, problem_responses
from app.core.timestamps import TIMESTAMP_FORMAT, Timestamp
from app.monitoring import arms, feedback, report, shadow_service
from app.monitoring import log as prediction_log
from app.monitoring.log import PredictionLogDep
from app.monitoring.schemas import (
    FeedbackOut,
    FeedbackRequest,
    MonitoringReport,
    ShadowReport,
    ShadowUpdate,
)
from app.registry.paths import NamePath
from app.registry.references import BARE_NAME, SERVING_ALIAS

router = APIRouter(tags=["monitoring"])
#: A stored model's report: a part of the /models router (app.routers.MODEL_PARTS).
model_router = APIRouter(tags=["monitoring"])

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
    runtime: RuntimeDep,
    session: SessionDep,
    settings: SettingsDep,
    body: Annotated[FeedbackRequest, Body(openapi_examples=_FEEDBACK_EXAMPLES)],
) -> dict[str, Any]:
    return feedback.record_feedback(session, runtime, body, settings)


Since = Annotated[
    Timestamp | None, Query(description=f"Window start (inclusive): {TIMESTAMP_FORMAT}; UTC")
]
Until = Annotated[
    Timestamp | None,
    Query(description=f"Window end (exclusive): {TIMESTAMP_FORMAT}; UTC; with `since`, it "
          "must be after since"),
]
Alias = Annotated[
    str | None,
    Query(max_length=100, description="An alias (give alias or version, not both)",
          examples=["production"]),
]
Version = Annotated[int | None, Query(ge=1, le=2**31 - 1, description="Or a version")]
Arm = Annotated[Literal["primary", "canary"] | None, Query(
    description="With an alias that has a canary (default `production`): the report of that "
    "arm's version (422 naming `arm` when the alias has no canary)")]
Bucket = Annotated[Literal["minute", "hour", "day"], Query(
    description="labelled.buckets: the rows with feedback per UTC minute, hour or day")]
_PNG = {200: image_response_doc("png"), **problem_responses(404, 422)}
_FIGURE = (
    " As a PNG (1200 × 450): left, the cumulative distributions of the reference and live "
    "decision values (dotted: ±θ̂); right, the accuracy and θ̂ of the rows with feedback per "
    "UTC day they were predicted."
)


def _png(body: bytes) -> Response:
    return Response(content=body, media_type="image/png")


def _registered(session: Session, name: str, alias: str | None, version: int | None,
                arm: str | None = None) -> int:
    if alias is not None and version is not None:
        raise invalid(["query", "version"], "give alias or version, not both")
    if arm is not None:
        if version is not None:
            raise invalid(["query", "arm"], "give arm with an alias (or none: production), not "
                          "with a version")
        return feedback.arm_model(session, name, alias or SERVING_ALIAS, arm, ["query", "arm"])
    reference = f"{name}@{alias}" if alias else f"{name}/{version}" if version else name
    return feedback.resolve_reference(session, reference, ["path", "name"])


class Window(NamedTuple):
    """What a report route reads: the model, the window and this process's log writer (the
    arguments of ``report.model_report`` and ``report.model_figure``)."""

    session: Session
    model_id: int
    since: datetime | None
    until: datetime | None
    writer: prediction_log.PredictionLogWriter | None


def _model_window(
    writer: PredictionLogDep,
    session: SessionDep,
    model_id: int,  # (checked by app.core.ids.check_ids, as every path id)
    since: Since = None,
    until: Until = None,
) -> Window:
    return Window(session, model_id, since, until, writer)


def _registered_window(
    writer: PredictionLogDep,
    session: SessionDep,
    name: str,
    alias: Alias = None,
    version: Version = None,
    since: Since = None,
    until: Until = None,
    arm: Arm = None,
) -> Window:
    model_id = _registered(session, name, alias, version, arm)
    return Window(session, model_id, since, until, writer)


ModelWindow = Annotated[Window, Depends(_model_window)]
RegisteredWindow = Annotated[Window, Depends(_registered_window)]


@model_router.get(
    "/{model_id}/monitoring",
    summary="A model's monitoring report",
    description=(
        "The training part's decision values (reference) against the logged ones in the "
        "window (live), their Kolmogorov-Smirnov drift (p-value < 0.01: drifted) and per "
        "feature (binned KS, the features that moved most), and the accuracy and margin "
        "statistics of the logged rows with feedback (docs/monitoring.md)."
    ),
    response_model=MonitoringReport,
    responses=problem_responses(404, 422),
)
def get_model_monitoring(window: ModelWindow, bucket: Bucket = "day") -> dict[str, Any]:
    return report.model_report(*window, bucket=bucket)


@model_router.get(
    "/{model_id}/monitoring.png",
    summary="A model's monitoring report as a figure",
    description="The window of `GET /models/{id}/monitoring`." + _FIGURE,
    response_class=Response,
    responses=_PNG,
)
def get_model_monitoring_png(window: ModelWindow) -> Response:
    return _png(report.model_figure(*window))


@router.get(
    "/registered-models/{name}/monitoring",
    summary="The monitoring report of a registered model's version",
    description=(
        "The report of `GET /models/{id}/monitoring` for the stored model that the alias "
        "(`?alias=production`), else the version (`?version=2`), else the bare name "
        f"({BARE_NAME}) names now (`?arm=canary`: its canary's version); its "
        "live rows are every logged row of that stored model (by reference or by id). For an "
        "alias (or a bare name's `production`), `arms` adds each version that answered the "
        "alias's own rows in the window (a canary's two arms side by side): rows, feedback, "
        "realised accuracy, mean decision value, clipped share, rows per predicted class."
    ),
    response_model=MonitoringReport,
    responses=problem_responses(404, 422),
)
def get_registered_model_monitoring(window: RegisteredWindow, name: str, alias: Alias = None,
                                    version: Version = None,
                                    bucket: Bucket = "day") -> dict[str, Any]:
    body = report.model_report(*window, bucket=bucket)
    named = alias or (SERVING_ALIAS if version is None else None)
    if named is not None:
        body["arms"] = arms.alias_arms(window.session, name, named, window.since, window.until)
    return body


@router.get(
    "/registered-models/{name}/monitoring.png",
    summary="The monitoring report of a registered model's version as a figure",
    description="The window of `GET /registered-models/{name}/monitoring`." + _FIGURE,
    response_class=Response,
    responses=_PNG,
)
def get_registered_model_monitoring_png(window: RegisteredWindow) -> Response:
    return _png(report.model_figure(*window))


_SHADOW = "/registered-models/{name}/shadow"
_SHADOW_EXAMPLES = {
    "challenger": {
        "summary": "Score the served rows with the version alias `challenger` names",
        "value": {"alias": "challenger"},
    }
}


@router.put(
    _SHADOW,
    summary="Start a shadow",
    description=(
        "From now on, every row predicted through the registered model's default reference "
        "(`name`) or `name@production` is also scored, off the request path, by the version "
        "the alias names (the challenger, resolved as each batch is scored); both answers are "
        "stored. 422 naming `alias` when it is unknown, `production`, the served version "
        "itself, or has other classes or features. A running shadow of another alias is "
        "stopped; of the same alias, kept."
    ),
    response_model=ShadowReport,
    responses=problem_responses(404, 422),
)
def put_shadow(
    runtime: RuntimeDep,
    session: SessionDep,
    name: NamePath,
    body: Annotated[ShadowUpdate, Body(openapi_examples=_SHADOW_EXAMPLES)],
) -> dict[str, Any]:
    shadow_service.start(session, runtime, name, body.alias)
    return shadow_service.shadow_report(session, runtime, name)


@router.get(
    _SHADOW,
    summary="A shadow's report",
    description=(
        "The latest shadow (running or stopped): rows scored by both (`n`), the share with the "
        "same label (`agreement`), each side's live decision statistics (as the monitoring "
        "report's `live`) and accuracy on the rows with feedback. 404 when none was started."
    ),
    response_model=ShadowReport,
    responses=problem_responses(404),
)
def get_shadow(
    runtime: RuntimeDep, session: SessionDep, name: NamePath
) -> dict[str, Any]:
    return shadow_service.shadow_report(session, runtime, name)


@router.delete(
    _SHADOW,
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Stop a shadow",
    description="No row is scored by the challenger from now on; the scored rows stay for "
    "GET. 404 when no shadow runs.",
    responses=problem_responses(404),
)
def delete_shadow(runtime: RuntimeDep, session: SessionDep, name: NamePath) -> Response:
    shadow_service.stop(session, runtime, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
