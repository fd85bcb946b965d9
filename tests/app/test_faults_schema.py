"""Issue 15, points 9 and 10: a worker or an API on a database whose schema is older than the
code's migrations refuses to start with one clear line (it used to start, pass
``worker --check``, log a traceback every second and answer 500); and each worker process has
its own alive file, so ``worker --check`` cannot take one worker for another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command

from app.core.config import Settings
from app.core.db import alembic_config, make_engine
from app.jobs.worker import DEFAULT_ALIVE_FILE, alive_files, alive_path, check_alive
from tests.app.conftest import BACKENDS
from tests.app.support import (
    create_postgres_database,
    drop_postgres_database,
    start_worker_process,
    stop_workers,
    wait_for,
)


@pytest.fixture(params=BACKENDS)
def old_database(request, tmp_path):
    """A database migrated to revision 0003 only (the code's head is later)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = create_postgres_database(os.environ["TEST_DATABASE_URL"])
    engine = make_engine(url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(url, conn), "0003")
    engine.dispose()
    yield url
    if request.param != "sqlite":
        drop_postgres_database(os.environ["TEST_DATABASE_URL"], url)


def _cli(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        env={**os.environ, "MSVMAV_DATABASE_URL": url, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_worker_refuses_an_old_schema_with_one_line(old_database):
    r = _cli(old_database, "worker")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = [line for line in r.stderr.splitlines() if "0003" in line]
    assert len(lines) == 1 and "msvmav migrate" in lines[0], r.stderr


def test_worker_check_fails_on_an_old_schema(old_database, tmp_path):
    alive = tmp_path / "alive"
    alive.touch()  # the loop moves: only the schema is wrong
    r = _cli(old_database, "worker", "--check", env={"MSVMAV_WORKER_ALIVE_FILE": str(alive)})
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "0003" in r.stderr and "msvmav migrate" in r.stderr, r.stderr


def test_serve_refuses_an_old_schema(old_database):
    r = _cli(old_database, "serve", "--no-migrate", "--workers", "0", "--port", "1")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "0003" in r.stderr and "msvmav migrate" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_each_worker_has_its_own_alive_file(database_url, tmp_path):
    settings = Settings(_env_file=None)
    assert settings.worker_alive_file == DEFAULT_ALIVE_FILE
    assert alive_path(settings, 101) != alive_path(settings, 102)
    env = {"MSVMAV_WORKER_POLL_INTERVAL": "0.1"}
    procs = [
        start_worker_process(database_url, tmp_path, env=env, deployed_defaults=True)
        for _ in range(2)
    ]
    try:
        files = [Path(alive_path(settings, p.pid)) for p in procs]
        wait_for(lambda: all(f.exists() for f in files), timeout=60)
        assert {str(f) for f in files} <= set(alive_files(settings))
        check = ["worker", "--check", "--max-age", "3"]
        # (Other workers of this host, other tests' say, are checked too: this test only
        # asserts about its own two.)
        assert all(check_alive(str(f), 3)[0] for f in files)
        # One worker stops moving: the check names it, although the other one moves.
        os.kill(procs[0].pid, signal.SIGSTOP)
        wait_for(lambda: not check_alive(str(files[0]), 3)[0], timeout=30, interval=0.5)
        assert check_alive(str(files[1]), 3)[0]
        r = _cli(database_url, *check)
        assert r.returncode == 1, r.stderr
        assert str(files[0]) in r.stderr and "stalled" in r.stderr, r.stderr
        assert str(files[1]) not in r.stderr, r.stderr
        os.kill(procs[0].pid, signal.SIGCONT)  # so that it can exit cleanly below
    finally:
        stop_workers(procs)
    assert not any(f.exists() for f in files)  # removed at a clean exit
