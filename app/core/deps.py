"""Typed dependencies, so route signatures say what they need."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import anyio
from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.runtime import Runtime

#: The methods that only read: their requests get a read-only session, and a ``read`` key may
#: use them on the routers that decide by method (``app.auth.security.require_by_method``). No
#: route answers OPTIONS (405).
READ_METHODS = frozenset({"GET", "HEAD"})


async def get_session(request: Request) -> AsyncIterator[Session]:
    """One session per request. Who commits — the rule, stated here once: a service function
    that **creates** rows adds and flushes them but never commits; the route passes it to
    ``app.core.idempotency.create_once``, which commits the rows in one transaction with the
    request's Idempotency-Key record (a worker likewise commits a job's products with its
    ``succeeded``: ``app.jobs.runtime.JobResult``). A service function that **changes or
    deletes** (cancel, delete, revoke) commits its own write, once, at its end. Anything not
    committed is rolled back here, so a failing request leaves nothing half-written. A GET or HEAD
    reads in a read-only transaction (``begin_read``: on SQLite it never queues for the write
    lock, and a write in it fails).

    Async, so that it costs no trip to the thread pool: creating a session does no I/O (it
    connects on first use), nor does closing one whose transaction has ended; only a rollback
    of a transaction still open runs in a thread, of a limiter of its own (as FastAPI does for
    the exit of a sync dependency): a session holding a connection never waits for a thread
    of the routes' pool, whose routes may be waiting for that connection."""
    runtime: Runtime = request.app.state.runtime
    read = request.method in READ_METHODS
    session = (runtime.read_sessions if read else runtime.sessions)()
    try:
        yield session
    finally:
        if session.in_transaction():
            await anyio.to_thread.run_sync(session.close, limiter=anyio.CapacityLimiter(1))
        else:
            session.close()


async def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_runtime(request: Request) -> Runtime:
    """The app's runtime state (app.core.runtime): made by ``create_app``, closed at the end
    of its lifespan. The domains' dependencies on one of its parts start from it."""
    return request.app.state.runtime


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
