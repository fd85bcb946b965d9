"""Issue 15 (faults), point 10: a client trickling its request's headers one byte a second
is cut off after MSVMAV_HEADER_TIMEOUT by a real ``msvmav serve`` (uvicorn has no such
timeout of its own), and the server goes on answering everyone else meanwhile."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_server import LiveServer, live_server
from tests.wait_support import simulate_slow_peer

HEADER_TIMEOUT = 2.0
# Far longer than the timeout: without it the trickle would go on for this long.
TRICKLE_SECONDS = 15


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp_path: Path = tmp_path_factory.mktemp("header-timeout")
    with live_server(tmp_path, MSVMAV_HEADER_TIMEOUT=str(HEADER_TIMEOUT)) as s:
        yield s


def _connect(server: LiveServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _get_livez(server: LiveServer) -> int:
    with urllib.request.urlopen(server.url + "/livez", timeout=5) as r:
        return r.status


def _read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body) from a kept-alive connection."""
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":", 1)[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_trickled_headers_are_cut_off_and_others_are_served(server):
    sock = _connect(server)
    head = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
    start = time.monotonic()
    answer, others = b"", []
    with sock:
        sock.settimeout(1.0)  # one byte a second: each wait is a second of silence
        for byte in head[:TRICKLE_SECONDS]:
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # the server has closed the connection
                break
            others.append(_get_livez(server))  # another client, answered meanwhile
            try:
                answer = sock.recv(65536)
                break  # the server spoke (or closed: b"")
            except TimeoutError:
                continue
        closed_after = time.monotonic() - start
        answer += _read_until_closed(sock)
    assert closed_after < HEADER_TIMEOUT + 2.5, closed_after  # not the whole trickle
    assert closed_after >= HEADER_TIMEOUT - 0.5, closed_after  # not before the deadline
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout", answer
    problem = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert problem["status"] == 408 and "headers" in problem["detail"]
    assert others and set(others) == {200}
    assert _get_livez(server) == 200


def test_a_body_slower_than_the_header_timeout_is_not_cut(server):
    """The deadline covers the request line and headers only: once they are in, a body may
    take longer (its size is capped elsewhere)."""
    body = json.dumps({"model_id": 999999, "instances": [[1.0, 2.0]]}).encode()
    head = (
        "POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    with _connect(server) as sock:
        sock.sendall(head)
        for part in (body[:5], body[5:10], body[10:]):
            simulate_slow_peer(HEADER_TIMEOUT * 0.6)  # 3.6 s in all, past the header deadline
            sock.sendall(part)
        answer = _read_response(sock)
    # the app read the whole body and answered: no model 999999
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:300]
    assert b"model 999999 not found" in answer


def test_a_kept_alive_connection_gets_a_fresh_deadline_per_request(server):
    request = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(request)
            assert _read_response(sock).startswith(b"HTTP/1.1 200 ")
            simulate_slow_peer(HEADER_TIMEOUT * 0.6)  # idle: together longer than a deadline
        sock.sendall(request)
        assert _read_response(sock).startswith(b"HTTP/1.1 200 ")
