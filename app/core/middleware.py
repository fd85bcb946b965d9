"""ASGI middleware: request ids, access log, metrics, last-resort 500s, and the upload size cap.

Pure ASGI (no BaseHTTPMiddleware) so that streaming bodies are not buffered and the request id
context variable is visible to the handlers.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from fastapi import HTTPException
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.logs import request_id_var
from app.core.problems import Problem, problem_response, too_large
from app.core.request_metrics import RequestMetrics, route_label
from app.core.routing import static_methods

access_log = logging.getLogger("app.access")
error_log = logging.getLogger("app.error")

_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class BodyTooLarge(HTTPException):
    """Raised from the counting ``receive`` (an HTTPException so that FastAPI's body reader
    passes it on instead of turning it into a 400); answered by ``app.core.problems.too_large``."""

    def __init__(self, limit: int, setting: str) -> None:
        super().__init__(413, f"request body exceeds the limit of {limit} bytes ({setting})")


class RequestContextMiddleware:
    """Sets/echoes ``X-Request-ID``, logs one access line per request, counts requests per route
    template and status, and answers unhandled exceptions with a problem+json 500."""

    def __init__(self, app: ASGIApp, metrics: RequestMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        start = time.perf_counter()
        state = {"status": 500, "started": False}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                state["started"] = True
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            error_log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if state["started"]:
                raise
            problem = Problem(500, "internal server error; see the server log for this request id")
            await problem_response(Request(scope), problem)(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            template = route_label(scope)
            self.metrics.observe(scope["method"], template, state["status"], elapsed)
            access_log.info(
                "method=%s path=%s route=%s status=%s duration_ms=%.1f",
                scope["method"],
                scope["path"],
                template,
                state["status"],
                elapsed * 1000,
            )
            request_id_var.reset(token)


def _is_multipart(scope: Scope) -> bool:
    content_type = dict(scope["headers"]).get(b"content-type", b"")
    return content_type.split(b";", 1)[0].strip().lower() == b"multipart/form-data"


class StaticPathMethods:
    """405 (problem+json, ``Allow`` listing the path's methods) for a method that a static
    path's routes do not take, before a parametrised route can match it (``GET /models/import``
    was a 422 from ``GET /models/{model_id}``): see ``app.core.routing``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            router = getattr(scope.get("app"), "router", None)
            allowed = static_methods(router, scope["path"])
            if allowed is not None and scope["method"] not in allowed:
                problem = Problem(405, "Method Not Allowed", headers={"Allow": ", ".join(allowed)})
                await problem_response(Request(scope), problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodySizeLimitMiddleware:
    """413 for bodies larger than their limit: ``upload_limit`` for multipart uploads, the much
    smaller ``json_limit`` for every other body (JSON requests), so that a JSON body is never
    buffered and parsed beyond it. At once when Content-Length says so, else as soon as the
    streamed body crosses the limit (before anything proportional to it is parsed)."""

    def __init__(self, app: ASGIApp, upload_limit: int, json_limit: int,
                 path_upload_limits: dict[str, tuple[int, str]] | None = None) -> None:
        self.app = app
        self.upload_limit = upload_limit
        self.json_limit = json_limit
        # a path's own multipart limit and its setting (POST /batch-predictions' larger files)
        self.path_upload_limits = path_upload_limits or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _is_multipart(scope):
            limit, setting = self.path_upload_limits.get(
                scope.get("path", ""), (self.upload_limit, "MSVMAV_MAX_UPLOAD_BYTES"))
        else:
            limit, setting = self.json_limit, "MSVMAV_MAX_JSON_BYTES"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            problem = too_large(BodyTooLarge(limit, setting).detail)
            await problem_response(Request(scope), problem)(scope, receive, send)
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit, setting)
            return message

        await self.app(scope, counting_receive, send)


def relative_slash_redirects(router: Router) -> None:
    """Redirect ``/datasets/`` to ``/datasets`` (and ``/docs/`` to ``/docs``) with a relative
    ``Location`` (path and query). Starlette's own ``redirect_slashes`` builds an absolute URL
    from the request's ``Host`` header, echoing whatever host a client (or an attacker in front
    of a cache) chose. Installed as the router's handler of unmatched requests."""
    router.redirect_slashes = False
    not_found = router.default

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        location = _slash_twin(router, scope)
        if location is None:
            await not_found(scope, receive, send)
            return
        await RedirectResponse(location, status_code=307)(scope, receive, send)

    router.default = default


def _slash_twin(router: Router, scope: Scope) -> str | None:
    """``path`` with its trailing slash removed (or one added) and the query, if some route
    matches that path; None otherwise. Never ``//…``, which a browser reads as another host."""
    path = scope.get("path", "")
    if scope["type"] != "http" or path == "/":
        return None
    twin = path.rstrip("/") if path.endswith("/") else path + "/"
    if not twin.startswith("/") or twin.startswith("//"):
        return None
    twin_scope = {**scope, "path": twin}
    if not any(route.matches(twin_scope)[0] is not Match.NONE for route in router.routes):
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    return twin + ("?" + query if query else "")
