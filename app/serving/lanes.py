"""Where a request is served: the lanes of ``serve`` (app.serving.serve), one policy for every
door (/predict, /v2 infer, invocations), chosen from what the request costs, not from its door.

* **On the event loop, no read**: at most ``INLINE_ROWS`` rows, no costly option (an
  explanation), and this process holds the model with every check younger than
  app.core.recheck's window (``app.serving.acquire.held``, no I/O): the answer needs no read at
  all, and a thread hop would cost more than the answer.
* **On the loop, a local read** (SQLite): the same requests when a check is due. The one read
  (the model's stamp, or a registry reference) is an indexed read of a local file in WAL mode,
  which never waits for a writer, on a connection of fetch_one's own pool held only inside that
  synchronous call and never across an await: the loop cannot wait for a connection that needs
  the loop (bench/serve.py: 0.45x the bare route through a thread, 0.9x on the loop).
* **The one-row fast lane** (PostgreSQL): the same requests when a check is due go to a thread
  of their own (``FAST_LANE_THREADS``, the runtime's ``FAST_LANE`` limiter): the read is a
  network round trip that must not stall the loop (and its probes) when the server is slow or
  away, nor wait behind the batches in the pool.
* **The pool** (anyio's worker threads): everything else, batches, explanations and cache
  misses (reading and rebuilding a model) included, so they never hold up the others.

A door's route gives ``serve_soon`` its request, its row count when known before decoding
(None: the pool) and ``render`` (the door's answer made a response, in the same lane: a render
that fails is an ``AnsweredError`` too). ``serve_inline`` may say "not here" (``NOT_INLINE``):
nothing was recorded, and the caller answers another way. With ``hand_on`` it says so too for a
request refused before its rows were recorded: ``serve`` raises nothing but ``AnsweredError``
once the sinks ran (app.serving.serve), so such a request can be answered again without being
recorded twice (/predict's middleware hands it to the route, which gives the refusal its usual
problem document, a 503 for a database away among them); an ``AnsweredError`` is never handed on.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

import anyio

from app.core.problems import Problem
from app.core.runtime import Part, Runtime
from app.serving.acquire import held, holds
from app.serving.serve import AnsweredError, Door, serve
from app.serving.target import Target, resolve_target

# Most rows a request may have to be answered on the loop or the fast lane.
INLINE_ROWS = 16
# Largest body a door parses on the loop to learn its row count (a one-row request is ~1 KB);
# a larger one is parsed, and served, in the pool.
INLINE_BODY_BYTES = 16 * 1024
# Threads of the one-row fast lane (PostgreSQL).
FAST_LANE_THREADS = 1
#: The fast lane's limiter (anyio's asyncio limiter binds to no loop: one per runtime).
FAST_LANE: Part[anyio.CapacityLimiter] = Part(
    "one-row fast lane", lambda _runtime: anyio.CapacityLimiter(FAST_LANE_THREADS)
)
#: ``serve_inline``'s "not in this lane": nothing was done.
NOT_INLINE: Final = object()
_MODEL_ID: list[str | int] = ["body", "model_id"]
R = TypeVar("R")


def _identity(answer: Any) -> Any:
    return answer


async def serve_inline(
    runtime: Runtime,
    door: Door[Any, Any],
    request: Any,
    ref: Target,
    *,
    rows: int | None,
    loc: list[str | int] | None = _MODEL_ID,
    render: Callable[[Any], Any] = _identity,
    hand_on: bool = False,
) -> Any:
    """``render(serve(...))`` on the loop or the fast lane (see the module's docstring) when
    the request has at most INLINE_ROWS ``rows`` and this process holds its model;
    ``NOT_INLINE`` otherwise (nothing recorded; with ``hand_on`` also when the request was
    refused before its rows were recorded). ``loc`` as for ``serve``."""
    if rows is None or rows > INLINE_ROWS:
        return NOT_INLINE
    if hand_on:
        try:
            return await serve_inline(runtime, door, request, ref, rows=rows, loc=loc,
                                      render=render)
        except AnsweredError:  # scored and recorded: never answered (and recorded) again
            raise
        except Exception:  # raised before the sinks ran (serve's contract): nothing recorded
            return NOT_INLINE
    door.admit(request, runtime.settings)  # (before the reference is resolved, as serve does)
    answer = partial(_served, runtime, door, request, loc=loc, render=render)
    fresh = held(runtime, ref)
    if fresh is not None:  # every check fresh (app.core.recheck): no read left, on the loop
        return answer(fresh)

    def fast() -> Any:
        try:
            resolved = resolve_target(runtime, ref, _ref_loc(loc))
        except Problem as problem:
            raise door.refused(request, problem, "acquire") from None
        if not holds(runtime, resolved.model_id):
            return NOT_INLINE
        return answer(resolved)

    if runtime.local:
        return fast()
    return await anyio.to_thread.run_sync(fast, limiter=runtime.get(FAST_LANE))


async def serve_soon(
    runtime: Runtime,
    door: Door[Any, Any],
    request: Any,
    ref: Target,
    *,
    rows: int | None,
    loc: list[str | int] | None = _MODEL_ID,
    render: Callable[[Any], R] = _identity,
) -> R:
    """``render(serve(...))`` in the cheapest lane the request may take (see the module's
    docstring): inline when it can, else in the pool."""
    inlined = await serve_inline(runtime, door, request, ref, rows=rows, loc=loc, render=render)
    if inlined is not NOT_INLINE:
        return inlined
    served = partial(_served, runtime, door, request, ref, loc=loc, render=render)
    return await anyio.to_thread.run_sync(served)


def _served(
    runtime: Runtime,
    door: Door[Any, Any],
    request: Any,
    ref: Target,
    *,
    loc: list[str | int] | None,
    render: Callable[[Any], R],
) -> R:
    answer = serve(runtime, door, request, ref, loc=loc)
    try:
        return render(answer)
    except Exception as exc:  # scored and recorded: never answered (and recorded) again
        raise AnsweredError(f"the response of a scored request failed: {exc!r}") from exc


def _ref_loc(loc: list[str | int] | None) -> list[str | int]:
    """Where a malformed reference is named: ``model`` beside ``loc``, else the path's
    reference (as app.serving.acquire names it)."""
    return [*loc[:-1], "model"] if loc else ["path", "model_ref"]
