"""Helpers of the fault tests: a real API process (``msvmav serve``) on 127.0.0.1, and a
PostgreSQL server of the test's own that it may stop and start (initdb + pg_ctl)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.live_server import free_port
from tests.wait_support import wait_until

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def have_postgres_binaries() -> bool:
    return all((PG_BIN / name).exists() for name in ("initdb", "pg_ctl", "postgres"))


@dataclass
class Api:
    url: str
    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _live(api: Api) -> bool:
    """``api`` answers /livez (its process must still run)."""
    assert api.proc.poll() is None, f"msvmav serve exited:\n{api.output()[-3000:]}"
    try:
        return httpx.get(api.url + "/livez", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def serve_api(database_url: str, directory: Path, **env: str) -> Iterator[Api]:
    """``msvmav serve --workers 0`` on a free port of 127.0.0.1 (this checkout's code); waits
    for /livez, SIGTERMs it afterwards."""
    port = free_port()
    log = directory / f"serve-{port}.log"
    environ = {**os.environ, "MSVMAV_DATABASE_URL": database_url, **env}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "serve", "--workers", "0", "--port", str(port)],
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    api = Api(f"http://127.0.0.1:{port}", proc, log)
    try:
        wait_until(lambda: _live(api), timeout=60, interval=0.1,
                   message="msvmav serve did not answer /livez")
        yield api
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class PostgresServer:
    """A PostgreSQL 15 cluster in a temporary directory, on a free port of 127.0.0.1, trust
    authentication; ``stop`` (fast shutdown) and ``start`` it at will."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="msvmav-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self.owner: dict = {}
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root: as `nobody`
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self.owner = {"user": nobody.pw_uid, "group": nobody.pw_gid}
        self._pg("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")

    def _pg(self, program: str, *args: object, check: bool = True) -> None:
        subprocess.run(
            [PG_BIN / program, *map(str, args)], check=check, capture_output=True, **self.owner
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -h 127.0.0.1 -c fsync=off"
        self._pg("pg_ctl", "-D", self.data, "-o", options, "-l", self.dir / "pg.log", "-w", "start")

    def stop(self) -> None:
        self._pg("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def close(self) -> None:
        self._pg("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.close()
