"""A real ``msvmav serve`` process on 127.0.0.1, a free port and a fresh SQLite database, for the
tests that drive the service from outside (the README test, the browser test)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.wait_support import wait_until

ROOT = Path(__file__).resolve().parents[1]
# Debian's Chromium, as the browser tests launch it (Playwright with the system browser; the
# background-networking flags keep it from reaching for Google's hosts on a closed network).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@dataclass
class LiveServer:
    url: str  # http://127.0.0.1:PORT
    cwd: Path  # the server's working directory, holding examples/ (a link)
    env: dict[str, str]  # its environment: PATH has the venv's bin first
    log: Path
    proc: subprocess.Popen | None = None  # the ``msvmav serve`` process, once started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_live(server: LiveServer, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"msvmav serve exited:\n{server.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    wait_until(ready, timeout=timeout, interval=0.2, message="msvmav serve did not answer /readyz")


@contextmanager
def live_server(tmp_path: Path, **env_extra: str) -> Iterator[LiveServer]:
    """Start ``msvmav serve`` (the installed command) with one embedded worker polling every
    0.1 s; SIGTERM it afterwards."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "examples").symlink_to(ROOT / "examples")
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "MSVMAV_DATABASE_URL": f"sqlite:///{tmp_path / 'live.db'}",
        "MSVMAV_WORKER_POLL_INTERVAL": "0.1",
        **env_extra,
    }
    msvmav = shutil.which("msvmav", path=env["PATH"])
    assert msvmav, "the msvmav command is not installed (pip install -e .)"
    server = LiveServer(f"http://127.0.0.1:{free_port()}", cwd, env, tmp_path / "serve.log")
    port = server.url.rsplit(":", 1)[1]
    with server.log.open("wb") as log:
        proc = server.proc = subprocess.Popen(
            [msvmav, "serve", "--port", port], cwd=cwd, env=env, stdout=log, stderr=log
        )
        try:
            _wait_live(server, proc)
            yield server
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
