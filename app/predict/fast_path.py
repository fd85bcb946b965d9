"""``POST /predict`` of a few rows without FastAPI's routing: an ASGI middleware, inside the
request-context, auth and body-size middlewares, that answers a one-row request exactly as the
route would, or hands it on untouched.

A one-row /predict spends more of its time in the framework (matching ~90 routes, solving the
route's dependencies, building request objects) than in the prediction. This middleware takes
the requests whose answer is certain to be the route's 200 and gives that answer itself, through
the same code (``app.predict.inline``); everything else goes on to the route, with the body it
read replayed. It answers only when every one of these holds, each a check the route's path
would make or pass:

* ``POST /predict`` with no query string (``reject_unknown_query``, ``check_request``'s query
  NUL check), a JSON content type, and a declared length of at most ``FAST_BODY_BYTES``;
* the auth middleware admitted a key of scope ``read`` (or the service is open): the route's
  ``require(read)`` dependency would pass;
* the body holds no NUL escape and is not deep enough to need ``check_json``;
* orjson parses it and ``PredictRequest`` validates it (the route's body validation);
* it has at most ``INLINE_ROWS`` rows and this process holds the model (app.serving.lanes'
  ``serve_inline``, the lane policy every door uses; ``NOT_INLINE`` otherwise, nothing done);
* it was not refused: a request the service refuses (a 404, a 422, a 503 for a database away)
  before its rows were recorded by the sinks (the prediction log, a shadow's queue) is handed
  on by the lane (``hand_on``) to the route, which refuses it with the usual problem document.
  This module catches no exception: one raised after the rows were recorded
  (``AnsweredError``: app.serving.serve, app.serving.lanes) is never handed on, since the
  route would score and record the request again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from fastapi.routing import iter_route_contexts
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.problems import Problem
from app.core.validation import json_needs_check
from app.predict import inline
from app.predict.schemas import PredictRequest
from app.serving.lanes import INLINE_BODY_BYTES, NOT_INLINE

PATH = "/predict"
# Largest body the middleware reads itself (a one-row request is about 1 KB).
FAST_BODY_BYTES = INLINE_BODY_BYTES


class PredictFastPath:
    """See the module's docstring."""

    def __init__(self, app: ASGIApp, admitted: Callable[[Scope], bool]) -> None:
        self.app = app
        self.admitted = admitted  # did the auth middleware admit a key of scope read?
        self._route: Any = None  # the /predict route, for the metrics' route label

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (_candidate(scope) and self.admitted(scope)):
            await self.app(scope, receive, send)
            return
        messages, body = await _read_body(receive)
        response = None
        if body is not None:
            response = await self._answer(scope, body)
        if response is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        scope["route"] = self._predict_route(scope)
        await response(scope, _replay(messages, receive), send)

    async def _answer(self, scope: Scope, body: bytes) -> Any:
        if json_needs_check(body):
            return None
        try:
            request = PredictRequest.model_validate(orjson.loads(body))
            target = inline.request_target(request, _header(scope, inline.ROUTE_KEY))
        except (orjson.JSONDecodeError, ValidationError, Problem):
            return None  # the route answers it (or refuses it as the body's problem)
        answer = await inline.inline_answer(scope["app"].state.runtime, request, target)
        return None if answer is NOT_INLINE else answer

    def _predict_route(self, scope: Scope) -> Any:
        if self._route is None:
            for route in iter_route_contexts(scope["app"].router.routes):
                if getattr(route, "path", None) == PATH and "POST" in getattr(route, "methods", ()):
                    self._route = route
                    break
        return self._route


def _header(scope: Scope, name: bytes) -> str | None:
    """The request's header ``name`` (lower case), decoded as Latin-1 as ASGI gives it."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _candidate(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
        return False
    if scope.get("query_string"):
        return False
    content_type = length = None
    for key, value in scope["headers"]:
        if key == b"content-type":
            content_type = value
        elif key == b"content-length":
            length = value
    media = (content_type or b"").split(b";", 1)[0].strip().lower()
    if media != b"application/json":
        return False
    return length is not None and length.isdigit() and int(length) <= FAST_BODY_BYTES


async def _read_body(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The messages of the request's body, and the body (None if the client went away)."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        if not message.get("more_body", False):
            break
    return messages, b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that gives ``messages`` first, then the client's own."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
