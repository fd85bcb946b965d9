"""Other packages' internals the service relies on (issue 27): uvicorn's ``H11Protocol``, in
app.core.header_timeout alone (uvicorn has no public hook for a request-head deadline). These
tests run that protocol on the installed uvicorn, in this process, on a real socket on
127.0.0.1, and fail on a version that renames or reshapes what it uses. Starlette's request
body is reached through public methods only (app.core.fastjson overrides ``body``,
``stream`` and ``json``): checked here too, as a real ASGI request."""

from __future__ import annotations

import asyncio
import json

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from app.core.fastjson import PREALLOCATE_BYTES, OrjsonRequest
from app.core.header_timeout import UVICORN_INTERNALS, protocol_with_header_timeout

TIMEOUT = 0.3


async def _ok(scope, receive, send) -> None:  # noqa: ANN001 - a plain ASGI app
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_uvicorn_still_has_what_the_header_timeout_uses():
    for name in ("connection_made", "data_received", "on_response_complete", "connection_lost"):
        assert callable(getattr(H11Protocol, name, None)), name
    config = uvicorn.Config(_ok, log_config=None)
    config.load()

    async def made() -> H11Protocol:
        return H11Protocol(config=config, server_state=ServerState(), app_state={})

    protocol = asyncio.run(made())
    for name in UVICORN_INTERNALS:
        if name != "transport":  # (set by connection_made: checked on a real one below)
            assert hasattr(protocol, name), name
    assert protocol.conn.their_state is not None  # an h11.Connection


async def _serve_and_probe(first: bytes) -> tuple[bytes, bytes]:
    """The answers of a connection sending ``first`` and stopping, and of a whole request."""
    cls = protocol_with_header_timeout(TIMEOUT)
    config = uvicorn.Config(_ok, log_config=None, http=cls)
    config.load()
    state = ServerState()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: cls(config=config, server_state=state, app_state={}), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(first)
        cut = await asyncio.wait_for(reader.read(), timeout=5 * TIMEOUT + 5)  # until closed
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        whole = await asyncio.wait_for(reader.read(), timeout=5)
        writer.close()
        return cut, whole
    finally:
        server.close()
        await server.wait_closed()


def test_the_header_timeout_runs_on_the_installed_uvicorn():
    """A partial head gets the 408 problem and the connection closes after the deadline; a
    whole request is answered by the app."""
    cut, whole = asyncio.run(_serve_and_probe(b"GET / HTTP/1.1\r\nhos"))
    head, _, body = cut.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), cut
    assert json.loads(body)["status"] == 408
    assert whole.startswith(b"HTTP/1.1 200") and b"\r\nok\r\n" in whole


def _request(body: bytes) -> OrjsonRequest:
    chunks = [body[i : i + 10_000] for i in range(0, len(body), 10_000)]
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]

    async def receive() -> dict:
        return messages.pop(0)

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-length", str(len(body)).encode())],
    }
    return OrjsonRequest(scope, receive)


def test_a_large_body_is_buffered_once_and_replayed_through_public_methods():
    payload = {"instances": [[0.5] * 30] * (PREALLOCATE_BYTES // 100)}
    body = json.dumps(payload).encode()
    assert len(body) >= PREALLOCATE_BYTES  # the preallocating path

    async def read() -> tuple[bytes, object, bytes]:
        request = _request(body)
        first = await request.body()
        parsed = await request.json()
        replayed = b"".join([bytes(c) async for c in request.stream()])
        return bytes(first), parsed, replayed

    first, parsed, replayed = asyncio.run(read())
    assert first == body and replayed == body and parsed == payload
