"""orjson for the /predict routes: request bodies parsed and responses rendered in C.

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
from collections.abc import Callable, Coroutine, Iterator
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


def loads(body: bytes) -> Any:
    with gc_paused():
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return json.loads(body)  # the standard library's answer (or its error) as before


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def orjson_handler(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return orjson_handler


def json_response(content: Any) -> Response:
    """``content`` (dicts, lists, str, int, float, bool, None; NaN/inf become null) as an
    application/json response."""
    return Response(orjson.dumps(content), media_type="application/json")
