"""What /predict's two entrances share: the route (app.predict.routes) and the middleware that
answers a few rows before FastAPI's routing (app.predict.fast_path). Both hand the request to
the serving room's lanes (app.serving.lanes: on the loop, the fast lane or the pool, a policy
of ``serve`` every door uses) with ``RowsDoor`` (app.predict.service) as its codec."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from app.core.runtime import Runtime
from app.predict import service
from app.predict.numeric_rows import row_count
from app.predict.schemas import PredictRequest
from app.registry import canary
from app.serving import lanes
from app.serving.target import Target, route_key, target_of

_MODEL_LOC: list[str | int] = ["body", "model"]


#: The route key's header (app.registry.canary), and as ASGI scopes spell it.
ROUTE_KEY_HEADER = canary.ROUTE_KEY_HEADER
ROUTE_KEY = ROUTE_KEY_HEADER.lower().encode()


def request_target(request: PredictRequest, header: str | None = None) -> Target:
    """The model the request names (422 naming ``model`` when it names it wrongly); an alias's
    canary arm is chosen by the ``X-Msvmav-Route-Key`` ``header``, else the first id."""
    key = route_key(header, request.ids)
    return target_of(request.model_id, request.model, _MODEL_LOC, routed=True, route_key=key)


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
        rows=_lane_rows(request), render=service.answered, hand_on=True,
    )


async def answer(runtime: Runtime, request: PredictRequest, header: str | None = None) -> Response:
    """The answer in the cheapest lane the request may take (``header``: the route key's)."""
    return await lanes.serve_soon(
        runtime, service.ROWS, rows_request(request), request_target(request, header),
        rows=_lane_rows(request), render=service.answered,
    )
