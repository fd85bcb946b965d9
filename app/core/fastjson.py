"""orjson for the serving doors' routes (/predict, invocations, thresholds): request bodies
parsed and responses rendered in C.

``OrjsonRoute`` is FastAPI's documented custom-route pattern: it hands the usual handler (body
validation, every dependency, exception handlers) a request whose ``json()`` parses with
orjson. Bodies orjson refuses (NaN/Infinity literals, integers beyond 64 bits, invalid JSON)
are parsed again by the standard library, so they get exactly the answers they got before.
A 100,000-row body creates a few million Python objects and no reference cycles: the cyclic
garbage collector is paused while they are built, instead of scanning the heap many times over.
"""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting still frees everything); for
    bulk building of acyclic containers. Re-enables it only if it was enabled."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Bodies from this size on are read into a preallocated buffer (OrjsonRequest.body).
PREALLOCATE_BYTES = 64 * 1024


def loads(body: bytes) -> Any:
    with gc_paused():
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return json.loads(body)  # the standard library's answer (or its error) as before


class OrjsonRequest(Request):
    """Starlette's Request with ``body``, ``stream`` and ``json`` overridden (public methods
    only: the buffered body and the parsed value are this class's own attributes, not
    Starlette's private caches)."""

    # A parser tried first (a subclass's): the body's JSON value, or None to parse it whole.
    parse_first: Callable[[bytes], Any] | None = None
    # A check of the raw body before any parse (a subclass's): raises to refuse it (a Problem
    # raised while FastAPI parses the body would become its 400, so OrjsonRoute calls it).
    check_first: Callable[[bytes, Any], None] | None = None
    _buffered: bytearray | None = None  # the body read by ``body`` into one buffer
    _parsed: Any = None
    _has_parsed = False

    async def body(self) -> bytes:
        """The body, read into one buffer of its declared length (the size limit middleware
        has checked it) instead of chunks joined at the end: the body is held once, not twice.
        Without a Content-Length (or a body that is not that long): Starlette's way."""
        if self._buffered is not None:
            return self._buffered
        length = self.headers.get("content-length", "")
        if not length.isdigit() or int(length) < PREALLOCATE_BYTES:
            return await super().body()
        buffer = bytearray(int(length))
        view, filled = memoryview(buffer), 0
        async for chunk in super().stream():
            if filled + len(chunk) > len(buffer):
                raise ValueError("the body is longer than its Content-Length")  # h11 refuses it
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
        view.release()
        if filled != len(buffer):
            del buffer[filled:]
        self._buffered = buffer  # a bytearray: every reader here takes any bytes-like object
        return buffer

    async def stream(self) -> AsyncIterator[bytes]:
        """The body's chunks; once ``body`` has buffered it, that buffer (as Starlette replays
        a body it has read)."""
        if self._buffered is not None:
            yield self._buffered
            yield b""
            return
        async for chunk in super().stream():
            yield chunk

    async def json(self) -> Any:
        if not self._has_parsed:
            body = await self.body()
            parsed = type(self).parse_first(body) if type(self).parse_first else None
            self._parsed = parsed if parsed is not None else loads(body)
            self._has_parsed = True
        return self._parsed


class OrjsonRoute(APIRoute):
    request_class: type[OrjsonRequest] = OrjsonRequest

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        request_class = self.request_class

        async def orjson_handler(request: Request) -> Response:
            ours = request_class(request.scope, request.receive)
            if request_class.check_first is not None:  # here, its error is the answer
                request_class.check_first(await ours.body(), request.app.state.settings)
            return await handler(ours)

        return orjson_handler


def json_response(content: Any) -> Response:
    """``content`` (dicts, lists, str, int, float, bool, None; NaN/inf become null) as an
    application/json response."""
    return Response(orjson.dumps(content), media_type="application/json")
