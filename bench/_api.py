"""A fresh API process for the benches that measure what one request costs the server:
``msvmav serve`` on 127.0.0.1 over a scratch SQLite database, migrated first, and its peak
resident set (VmHWM) read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.live_server import free_port  # noqa: E402


def peak_kib(pid: int) -> int:
    """The process's peak resident set so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


@contextmanager
def live_api(settings: dict[str, str], timeout: float,
             serve_args: tuple[str, ...] = ()) -> Iterator[tuple[httpx.Client, int]]:
    """A client of a new API process (MSVMAV_* ``settings`` added to the environment: a
    ``MSVMAV_DATABASE_URL`` there replaces the scratch SQLite file; ``serve_args`` added to
    ``msvmav serve``'s, e.g. ``--workers 1``) and the process's pid; the process is stopped,
    and its scratch database removed, on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {**os.environ, "MSVMAV_DATABASE_URL": f"sqlite:///{tmp}/bench.db",
               "MSVMAV_LOG_LEVEL": "WARNING", **settings}
        subprocess.run([sys.executable, "-m", "app.cli.main", "migrate"], env=env, cwd=ROOT,
                       check=True, capture_output=True)
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "serve", "--host", "127.0.0.1",
             "--port", str(port), *serve_args],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=timeout) as client:
                deadline = time.monotonic() + 120  # (a loaded machine starts it slowly)
                while time.monotonic() < deadline:
                    try:
                        if client.get("/livez").status_code == 200:
                            break
                    except httpx.TransportError:
                        time.sleep(0.1)
                yield client, server.pid
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
