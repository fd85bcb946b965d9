"""What /predict's two entrances share: the route (app.predict.routes) and the middleware that
answers a few rows before FastAPI's routing (app.predict.fast_path). Both hand the request to
the serving room's lanes (app.serving.lanes: on the loop, the fast lane or the pool, a policy
of ``serve`` every door uses) with ``RowsDoor`` (app.predict.service) as its codec."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from app.core.fastjson import json_response
from app.core.runtime import Runtime
from app.predict import service
from app.predict.numeric_rows import row_count
from app.predict.schemas import PredictRequest
from app.serving import lanes
from app.serving.target import Target, target_of

_MODEL_LOC: list[str | int] = ["body", "model"]


def request_target(request: PredictRequest) -> Target:
    """The model the request names (422 naming ``model`` when it names it wrongly)."""
    return target_of(request.model_id, request.model, _MODEL_LOC)


def rows_request(request: PredictRequest) -> service.RowsRequest:
    return service.RowsRequest(
        instances=request.instances,
        labels=request.labels,
        ids=request.ids,
        explain=request.explain,
        rule=request.rule,
        threshold=request.threshold,
    )


def _lane_rows(request: PredictRequest) -> int | None:
    """The row count that picks the lane; None (the pool) for an explanation, whose cost is up
    to MSVMAV_MAX_EXPLAIN_WORK: never on the loop."""
    return None if request.explain else row_count(request.instances)


async def inline_answer(runtime: Runtime, request: PredictRequest, target: Target) -> Any:
    """The answer on the loop or the fast lane, or ``lanes.NOT_INLINE``: nothing recorded, the
    route answers it (its refusal too: ``hand_on``)."""
    return await lanes.serve_inline(
        runtime, service.ROWS, rows_request(request), target,
        rows=_lane_rows(request), render=json_response, hand_on=True,
    )


async def answer(runtime: Runtime, request: PredictRequest) -> Response:
    """The answer in the cheapest lane the request may take."""
    return await lanes.serve_soon(
        runtime, service.ROWS, rows_request(request), request_target(request),
        rows=_lane_rows(request), render=json_response,
    )
