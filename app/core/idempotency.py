"""``Idempotency-Key`` on the POSTs that create something (``/datasets``, ``/train``,
``/experiments``): a client that retries after a timeout or a dropped connection gets the first
response again instead of a second dataset or job.

* the first successful response (status, body, ``Location``) is stored under the key in the
  same transaction as the row it created: either both exist or neither;
* the same key with the same request (same method, path and body — for an upload: the same file
  bytes, file name and options) → that response replayed, with ``Idempotent-Replayed: true``;
* the same key with another request → 409 naming the header (the key is bound to the first
  request: a conflict with what is stored, not an invalid request); nothing is created;
* two concurrent requests with one key: both may do the work, but the key's primary key lets
  one commit; the other rolls back (its row vanishes) and replays the winner's response;
* a request that failed (4xx) stores nothing: retrying it with the same key runs it again.

Keys are scoped per principal: ``request.state.principal`` (set by authentication once API keys
exist; None until then) is hashed with the key into the table's primary key.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.db import begin_read
from app.core.orm import IdempotencyKey
from app.core.problems import conflict

log = logging.getLogger("app.core.idempotency")

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias=HEADER,
        min_length=1,
        max_length=255,
        description="Any unique string (e.g. a UUID) chosen by the client. Retrying this POST "
        "with the same key and the same request returns the first response (same status, body "
        "and Location; header `Idempotent-Replayed: true`) and creates nothing new; the same "
        "key with a different request answers 409. Keys are kept indefinitely.",
        examples=["3f1c2a9e-8d4b-4e0f-9a51-2b7c6d8e9f10"],
    ),
]


REPLAYED_RESPONSE_HEADER = {
    REPLAYED_HEADER: {
        "description": "`true` when this is the stored response to an earlier request with the "
        "same Idempotency-Key (nothing was created by this one)",
        "schema": {"type": "string", "enum": ["true"]},
    }
}


@dataclass(frozen=True)
class Created:
    """A create's response, before it is committed: status, JSON body and ``Location``."""

    status_code: int
    body: dict[str, Any]
    location: str


def fingerprint(method: str, path: str, payload: Any) -> str:
    """sha256 of the request's method, path and canonical JSON payload."""
    text = json.dumps([method, path, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def scope(principal: str | None, key: str) -> str:
    """The table's primary key: the key within its principal's namespace."""
    return hashlib.sha256(f"{principal or ''}\n{key}".encode()).hexdigest()


def create_once(
    session: Session,
    request: Request,
    key: str | None,
    payload: Any,
    create: Callable[[], Created],
) -> JSONResponse:
    """Run ``create`` (which adds rows to ``session`` without committing) and commit it with
    the response stored under ``key``; or replay the response stored under ``key``.
    ``payload``: the request's content as JSON-able data (what "the same request" means)."""
    if key is None:
        created = create()
        session.commit()
        return _response(created.status_code, created.body, {"Location": created.location})
    principal = getattr(request.state, "principal", None)
    key_scope = scope(principal, key)
    print_ = fingerprint(request.method, request.url.path, payload)
    # The lookup reads in a read-only transaction (on SQLite: no queueing for the write lock,
    # so a replay never waits for a writer); it ends before create() writes in a new one.
    begin_read(session)
    stored = session.get(IdempotencyKey, key_scope)
    if stored is not None:
        return _replay(stored, print_, request)
    session.rollback()  # end the read: create() must not write in a read-only transaction
    created = create()
    headers = {"Location": created.location}
    session.add(
        IdempotencyKey(
            scope=key_scope,
            principal=principal,
            key=key,
            fingerprint=print_,
            method=request.method,
            path=request.url.path,
            status_code=created.status_code,
            body=created.body,
            headers=headers,
        )
    )
    try:
        session.commit()
    except IntegrityError:
        session.rollback()  # a concurrent request with this key committed first
        begin_read(session)
        stored = session.get(IdempotencyKey, key_scope, populate_existing=True)
        if stored is None:
            raise
        log.info("idempotency key taken by a concurrent request; its response is replayed")
        return _replay(stored, print_, request)
    return _response(created.status_code, created.body, headers)


def _replay(stored: IdempotencyKey, print_: str, request: Request) -> JSONResponse:
    if stored.fingerprint != print_:
        raise conflict(
            f"this key was first used for another request ({stored.method} {stored.path} "
            f"with a different body); {request.method} {request.url.path} with this body needs "
            "a new key",
            ["header", HEADER],
        )
    return _response(stored.status_code, stored.body, {**stored.headers, REPLAYED_HEADER: "true"})


def _response(status_code: int, body: dict[str, Any], headers: dict[str, str]) -> JSONResponse:
    return JSONResponse(body, status_code=status_code, headers=headers)
