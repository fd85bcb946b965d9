"""The answer of a /predict request of a few rows for a model this process holds, given on the
event loop (SQLite) or on the one-row fast lane (PostgreSQL): shared by the route and by
``app.predict.fast_path``, which gives it without FastAPI's routing when it can.

A few rows for a model this process holds. On SQLite they are answered on the event loop: the
one read (the model's stamp, or a registry reference) is an indexed read of a local file in WAL
mode, which never waits for a writer, on a connection of fetch_one's own pool, which is held
only inside that synchronous call and never across an await, so the loop cannot wait for a
connection that needs the loop (no deadlock by construction), and a thread hop would cost more
than the answer (bench/serve.py: 0.45x the bare route through a thread, 0.9x on the loop). On
PostgreSQL the read is a network round trip that must not stall the loop (and its probes) when
the server is slow or away: the rows go to a thread of their own (FAST_LANE_THREADS), unless
the request needs no read, its checks being younger than app.core.recheck's window (1 s by
default, on SQLite too): then they are answered on the loop with no read at all
(``app.serving.acquire.held``). Batches
and cache misses (reading and rebuilding a model) go to the pool, so they never hold up the
others.
"""

from __future__ import annotations

import anyio
from fastapi import Response

from app.core.fastjson import json_response
from app.core.runtime import Part, Runtime
from app.predict import service
from app.predict.numeric_rows import row_count
from app.predict.schemas import PredictRequest
from app.serving.acquire import held, holds
from app.serving.target import Target, resolve_target, target_of

# Most rows a /predict request may have to go to the fast lane.
INLINE_ROWS = 16
# Threads of the one-row fast lane (PostgreSQL).
FAST_LANE_THREADS = 1
#: The fast lane's limiter (anyio's asyncio limiter binds to no loop: one per runtime).
FAST_LANE: Part[anyio.CapacityLimiter] = Part(
    "one-row fast lane", lambda _runtime: anyio.CapacityLimiter(FAST_LANE_THREADS)
)
_MODEL_LOC: list[str | int] = ["body", "model"]


def request_target(request: PredictRequest) -> Target:
    """The model the request names (422 naming ``model`` when it names it wrongly)."""
    return target_of(request.model_id, request.model, _MODEL_LOC)


def answer(runtime: Runtime, request: PredictRequest, target: Target) -> Response:
    """The answer to ``request`` (synchronous: a batch or a cache miss runs it in a thread)."""
    return json_response(
        service.predict_rows(
            runtime,
            target,
            service.RowsRequest(
                instances=request.instances,
                labels=request.labels,
                ids=request.ids,
                explain=request.explain,
                rule=request.rule,
                threshold=request.threshold,
            ),
        )
    )


async def inline_answer(
    runtime: Runtime, request: PredictRequest, target: Target
) -> Response | None:
    """The answer when the request has at most INLINE_ROWS rows and this process holds its
    model (see the module's docstring); None otherwise (the caller answers in a thread)."""
    if request.explain or row_count(request.instances) > INLINE_ROWS:
        return None  # explaining costs up to MSVMAV_MAX_EXPLAIN_WORK: never on the loop

    def fast() -> Response | None:
        resolved = resolve_target(runtime, target, _MODEL_LOC)
        if not holds(runtime, resolved.model_id):
            return None
        return answer(runtime, request, resolved)

    fresh = held(runtime, target)
    if fresh is not None:  # every check fresh (app.core.recheck): no read left, on the loop
        return answer(runtime, request, fresh)
    if runtime.local:
        return fast()
    return await anyio.to_thread.run_sync(fast, limiter=runtime.get(FAST_LANE))
