"""``POST /models/{ref}/threshold``: fit a decision rule on a model's out-of-fold probabilities
and store it (a write: a write key), its curve as JSON or drawn (app.predict.thresholds)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response, Security

from app.auth.keys import Principal
from app.auth.security import require_by_method
from app.core.deps import SessionDep
from app.core.fastjson import json_response
from app.core.plotting import IMAGE_TYPES, image_response_doc
from app.core.problems import problem_responses
from app.predict import thresholds
from app.predict.threshold_schemas import ThresholdAnswer, ThresholdRequest

router = APIRouter(tags=["models"])  # under /models (app.routers.MODEL_PARTS)
ActorDep = Annotated[Principal | None, Security(require_by_method)]

_DOC = (
    "`{model_ref}`: a stored model's id or a registry reference (`name@alias`, `name/version`, "
    "`name`). Fits a decision rule to the objective on the model's **out-of-fold** "
    "probabilities (its calibration's cross-validated decision values through its calibrator; "
    "never its hold-out): `cost_fp` and `cost_fn` (two classes: the threshold on P(positive) "
    "of least cost), `cost_matrix` (the Bayes rule argmin_j sum_i P_i C[i][j]), or a "
    "`target` precision / recall / false-positive rate for the `positive` class. Answers with "
    "the rule and its threshold, the objective out of fold and on the model's hold-out part "
    "(with a 95 % interval: bootstrap of the mean cost, Wilson for a rate; `holdout_argmax`: "
    "the argmax rule's, for comparison) and the curve against the threshold. With `store` "
    "(default) the rule labels every answer given for that reference: stored on the alias "
    "for `name@alias` (recorded in the alias's history; a rollback restores the rule it had), "
    "else on the model. 409 for a model without probabilities (calibration 'none') or without "
    "out-of-fold values."
)
_EXAMPLES = {
    "5:1 cost": {"summary": "A false negative costs five false positives",
                 "value": {"objective": {"cost_fp": 1, "cost_fn": 5}}},
    "recall": {"summary": "Find 90 % of class 2",
               "value": {"objective": {"target": "recall", "value": 0.9, "positive": 2}}},
}
Request = Annotated[ThresholdRequest, Body(openapi_examples=_EXAMPLES)]


@router.post(
    "/{model_ref:path}/threshold",
    summary="Fit and set a model's decision rule",
    description=_DOC,
    response_model=ThresholdAnswer,
    responses=problem_responses(404, 409, 422),
)
def set_threshold(
    session: SessionDep, principal: ActorDep, model_ref: str, request: Request
) -> Response:
    actor = principal.name if principal is not None else None
    return json_response(thresholds.fit_threshold(session, model_ref, request, actor))


def _figure(fmt: str) -> Any:
    def handler(session: SessionDep, model_ref: str, request: Request) -> Response:
        answer = thresholds.fit_threshold(
            session, model_ref, request.model_copy(update={"store": False}))
        return Response(thresholds.threshold_figure(answer, fmt), media_type=IMAGE_TYPES[fmt])

    return handler


for _fmt in IMAGE_TYPES:
    router.post(
        f"/{{model_ref:path}}/threshold.{_fmt}",
        name=f"set_threshold_{_fmt}",
        summary=f"A decision rule's curve ({_fmt.upper()} figure)",
        description=_DOC + " The figure: the objective against the threshold out of fold and "
        "on the hold-out part, the chosen threshold marked; nothing is stored.",
        response_class=Response,
        responses={200: image_response_doc(_fmt), **problem_responses(404, 409, 422)},
    )(_figure(_fmt))
