"""A real HTTP receiver for the webhook tests: a threaded ``http.server`` on 127.0.0.1 that
records every POST (its headers, raw body and arrival time) and answers the status codes it
was given, in order (then 200); ``wait`` waits on a condition, never sleeps."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.wait_support import wait_until


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float
    answered: int


@dataclass
class Receiver:
    url: str
    answers: list[int] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait(self, n: int, timeout: float = 20.0) -> list[Received]:
        """The first ``n`` requests, once they came (AssertionError at the deadline)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.got) < n:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.got)} of {n} requests within {timeout} s"
                self.changed.wait(left)
            return list(self.got[:n])


@contextmanager
def receiver(answers: list[int] | None = None) -> Iterator[Receiver]:
    state = Receiver(url="", answers=list(answers or []))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with state.changed:
                code = state.answers.pop(0) if state.answers else 200
                state.got.append(Received({k.lower(): v for k, v in self.headers.items()},
                                          body, time.time(), code))
                state.changed.notify_all()
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def signature_ok(secret: str, received: Received, tolerance: float = 300.0) -> bool:
    """The receiver's check, written from the documented recipe (not the app's code):
    ``t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``, t within the tolerance."""
    fields = dict(part.split("=", 1) for part in received.headers["msvmav-signature"].split(","))
    signed = fields["t"].encode() + b"." + received.body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    fresh = abs(received.at - int(fields["t"])) <= tolerance
    return fresh and hmac.compare_digest(expected, fields["v1"])


def wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    """``predicate``'s first true answer, with a deadline (tests.wait_support)."""
    return wait_until(predicate, timeout=timeout, interval=0.05, message=f"no {what}")
