"""A deadline for a request's head (request line and headers) on ``msvmav serve``.

uvicorn has no such timeout: its keep-alive timer is cancelled by every byte received, so a
client sending one header byte a second holds a connection (and its buffer) forever; a few
hundred such clients exhaust the server's sockets ("slowloris"). This is uvicorn's own h11
protocol with one timer more: armed when a connection opens and when a response completes (the
next request's head may follow), cancelled once h11 has the whole head, and never moved by the
bytes that trickle in. When it fires with a partial head, the client gets a 408 problem+json and
the connection is closed; an idle connection is just closed.

uvicorn offers no public hook for this, so this module is the one place that relies on its
internals: ``H11Protocol`` (uvicorn.protocols.http.h11_impl) subclassed, its ``conn`` (the h11
connection), ``transport``, ``loop`` and its ``connection_made`` / ``data_received`` /
``on_response_complete`` / ``connection_lost`` methods (``UVICORN_INTERNALS``). Written against
uvicorn 0.54; tests/app/test_vendor_internals.py runs this protocol in process on
the installed uvicorn and fails on a version that changes any of them.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HEADER_TIMEOUT = 10.0
#: What of uvicorn's H11Protocol this module uses (see the module's docstring).
UVICORN_INTERNALS = (
    "conn",
    "transport",
    "loop",
    "connection_made",
    "data_received",
    "on_response_complete",
    "connection_lost",
)


def _timeout_response(seconds: float) -> bytes:
    body = json.dumps(
        {
            "type": "about:blank",
            "title": "Request Timeout",
            "status": 408,
            "detail": f"the request line and headers did not arrive within {seconds:g} s",
        }
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class HeaderTimeoutProtocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request head is not complete within
    ``header_timeout`` seconds (a class attribute: see ``protocol_with_header_timeout``)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._waiting_for_head():
            self._cancel_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._waiting_for_head():
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def _waiting_for_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _arm_head_deadline(self) -> None:
        self._cancel_head_deadline()
        self._head_deadline = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing() or not self._waiting_for_head():
            return
        partial, _closed = self.conn.trailing_data
        if partial:  # a head was started: say why the connection ends
            self.transport.write(_timeout_response(self.header_timeout))
        self.transport.close()


def protocol_with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class to give ``uvicorn.run(http=...)``: uvicorn builds one per connection
    with its own arguments, so the timeout travels as a class attribute."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})
