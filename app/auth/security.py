"""FastAPI wiring of the keys: the ``Security`` dependencies that check a route's scope (and
make Swagger UI's Authorize button appear), and a middleware that turns away requests without a
valid key before their body is read.

``app.main`` attaches one dependency per router: ``require(Scope.read)``,
``require(Scope.admin)`` or ``require_by_method`` (GET/HEAD read, anything else write).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from app.auth.gate import AuthGate, forbidden
from app.auth.keys import Principal, Scope
from app.core.deps import READ_METHODS
from app.core.problems import Problem, ProblemDetail, database_problem, problem_response
from app.core.validation import single_header

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    bearerFormat="msv_...",
    description="An API key (`msvmav keys create` or `POST /keys`), sent as "
    "`Authorization: Bearer <key>`. Scopes: read < write < admin.",
)


AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ProblemDetail,
        "description": "Missing, unknown or revoked API key (`Authorization: Bearer <key>`)",
        "headers": {
            "WWW-Authenticate": {
                "description": '`Bearer` (`Bearer error="invalid_token"` for a wrong key)',
                "schema": {"type": "string"},
            }
        },
    },
    403: {"model": ProblemDetail, "description": "The key's scope does not allow this operation"},
}

_STATE_KEY = "auth"


@dataclass(frozen=True)
class AuthResult:
    required: bool
    principal: Principal | None


def _gate(request: Request) -> AuthGate:
    return request.app.state.auth


OPEN = AuthResult(required=False, principal=None)


def check(gate: AuthGate, authorization: str | None) -> AuthResult:
    """Authenticate when keys are required (401 problem on failure); the key's
    ``last_used_at`` is stamped in the background when due. Reads the database."""
    if not gate.required():
        return OPEN
    return _admitted(gate, gate.authenticate(authorization))


def _admitted(gate: AuthGate, principal: Principal) -> AuthResult:
    """The result for a key found usable; its ``last_used_at`` stamped in the background when
    due (no I/O here)."""
    if gate.stamp_due(principal):
        gate.stamp_later(principal)
    return AuthResult(required=True, principal=principal)


async def check_async(gate: AuthGate, authorization: str | None) -> AuthResult:
    """``check`` from the event loop: on it while the service is known to be open or the key
    was found usable within app.core.recheck's window (no I/O: ``AuthGate.held``), and
    on SQLite, whose key read is an indexed read of a local WAL file on a connection of
    ``fetch_one``'s own pool, held only inside that synchronous call (never across an await:
    the loop cannot wait for a connection that needs the loop) — a thread hop would cost more
    than the read (bench/serve.py --auth: 0.47x the bare route through a thread); otherwise
    (a server database, a network round trip) in a thread of the key checks' own limiter
    (``AuthGate.threads``), on a connection of ``fetch_one``'s own pool: a key check needs neither
    a thread nor a connection that a request could be holding. A database
    that is away or busy answers 503 (``app.core.problems.database_problem``)."""
    if gate.known_open():
        return check(gate, authorization)
    held = gate.held(authorization)
    if held is not None:  # no I/O: on the loop
        return _admitted(gate, held)
    try:
        if gate.local:
            return check(gate, authorization)
        return await anyio.to_thread.run_sync(
            check, gate, authorization, limiter=gate.threads
        )
    except SQLAlchemyError as exc:
        problem = database_problem(exc)
        if problem is None:
            raise
        raise problem from None


async def authorize(request: Request, needed: Scope) -> Principal | None:
    """The request's key owner if keys are required (403 if the scope is too low); None when
    the service is open. Async: the middleware's result is at hand, so checking the scope
    costs no trip to the thread pool."""
    result: AuthResult | None = request.scope.get("state", {}).get(_STATE_KEY)
    if result is None:  # the middleware did not run (or skipped this path)
        result = await check_async(_gate(request), request.headers.get("authorization"))
    if not result.required:
        return None
    assert result.principal is not None
    if not result.principal.scope.covers(needed):
        raise forbidden(result.principal, needed, request.method, request.url.path)
    # Idempotency keys live in their key owner's namespace (app.core.idempotency).
    key_id = result.principal.key_id
    request.state.principal = "admin-key" if key_id is None else f"key:{key_id}"
    return result.principal


def admitted(scope: AsgiScope, needed: Scope) -> bool:
    """Has ``AuthMiddleware`` admitted this request for scope ``needed`` (the service is open,
    or its key covers the scope)? False when the middleware has not run: then only the routes'
    dependencies (``authorize``) may answer."""
    result: AuthResult | None = scope.get("state", {}).get(_STATE_KEY)
    if result is None:
        return False
    return not result.required or (
        result.principal is not None and result.principal.scope.covers(needed)
    )


_Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]


def require(needed: Scope) -> Callable[..., Awaitable[Principal | None]]:
    """Dependency: a key of scope ``needed`` or higher (when keys are required)."""

    async def dependency(request: Request, _credentials: _Credentials) -> Principal | None:
        return await authorize(request, needed)

    dependency.__name__ = f"require_{needed.value}"
    return dependency


async def require_by_method(request: Request, _credentials: _Credentials) -> Principal | None:
    """Dependency: a key of scope ``read`` for READ_METHODS (GET, HEAD), ``write`` for any
    other method (when keys are required)."""
    return await authorize(
        request, Scope.read if request.method in READ_METHODS else Scope.write
    )


class AuthMiddleware:
    """401 at once for a request that needs a key and has no valid one, before anything reads
    its body (an anonymous client cannot make the API parse a 200 MB upload). The scope check
    (403) stays with the routes' dependencies, which reuse this result."""

    def __init__(self, app: ASGIApp, gate: AuthGate, open_paths: Collection[str]) -> None:
        self.app = app
        self.gate = gate
        self.open_paths = frozenset(open_paths)
        # An open path ending in "/" opens everything below it (the docs' static assets), but
        # the root "/" (the web interface's redirect) opens only itself.
        self.open_prefixes = tuple(p for p in self.open_paths if p.endswith("/") and p != "/")

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or path in self.open_paths
            or (self.open_prefixes and path.startswith(self.open_prefixes))
        ):
            await self.app(scope, receive, send)
            return
        try:
            # Two Authorization headers (400): never pick one of them for the client.
            authorization = single_header(scope, b"authorization")
            result = await check_async(self.gate, authorization)
        except Problem as problem:
            await problem_response(Request(scope), problem)(scope, receive, send)
            return
        scope.setdefault("state", {})[_STATE_KEY] = result
        await self.app(scope, receive, send)
