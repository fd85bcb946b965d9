"""Helpers shared by the service tests: small data made in the test, upload/train shortcuts,
a job run in a thread, problem+json and image assertions."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from app.core.db import upgrade_to_head
from app.jobs.worker import Worker, claim_next_job, run_job
from tests.wait_support import wait_until

SHARED_DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def create_postgres_database(admin_url: str) -> str:
    """CREATE DATABASE msvmav_t_<xdist worker>_<random> next to ``admin_url``'s; returns its
    URL. Each test process (pytest-xdist worker) makes its own: none shares a database."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"msvmav_t_{worker}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(admin_url: str, url: str) -> None:
    name = make_url(url).database
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def run_jobs(worker: Worker) -> list[str]:
    """Run every queued job in-process (deterministic); their final statuses."""
    statuses = []
    while (status := worker.run_once()) is not None:
        statuses.append(status)
    return statuses


@contextmanager
def running_job(engine: Engine, worker: Worker,
                timeout: float = 60.0) -> Iterator[tuple[int, list[str]]]:
    """Claim the next queued job and run it in a thread, as a worker process would.

    Yields the job id and a list that holds the job's final status once the block has ended
    (the thread is joined there, and must have finished within ``timeout`` s)."""
    job_id = claim_next_job(engine, worker.worker_id)
    assert job_id is not None, "no queued job"
    statuses: list[str] = []
    w = worker
    t = threading.Thread(
        target=lambda: statuses.append(run_job(w.runtime, job_id, w.worker_id, w.settings))
    )
    t.start()
    try:
        yield job_id, statuses
    finally:
        t.join(timeout=timeout)
    assert not t.is_alive(), f"job {job_id} still running {timeout:g} s after the block"


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.02) -> Any:
    """``predicate``'s first true value; fail after ``timeout`` s (tests.wait_support)."""
    return wait_until(predicate, timeout=timeout, interval=interval)


def blobs(n: int = 80, d: int = 3, seed: int = 0, classes=("neg", "pos"), shift: float = 5.0):
    """Well separated Gaussian blobs: X (n, d), y labels cycling through ``classes``."""
    rng = np.random.default_rng(seed)
    y_idx = np.arange(n) % len(classes)
    centers = np.zeros((len(classes), d))
    centers[np.arange(len(classes)), np.arange(len(classes)) % d] = shift  # 2**0.5 * shift apart
    X = centers[y_idx] + rng.normal(size=(n, d))
    return X, np.asarray(classes)[y_idx]


def to_csv(X: np.ndarray, y, names=None, label: str = "y") -> bytes:
    names = names or [f"x{j}" for j in range(X.shape[1])]
    out = io.StringIO()
    out.write(",".join([*names, label]) + "\n")
    for row, lab in zip(X, y, strict=True):
        out.write(",".join([*(f"{v:.6f}" for v in row), str(lab)]) + "\n")
    return out.getvalue().encode()


def upload(client: TestClient, content: bytes, filename: str = "data.csv", **form) -> dict:
    r = client.post("/datasets", files={"file": (filename, content)}, data=form)
    assert r.status_code == 201, r.text
    return r.json()


def submit(client: TestClient, dataset_id: int, **params) -> dict:
    r = client.post("/train", json={"dataset_id": dataset_id, **params})
    assert r.status_code == 202, r.text
    return r.json()


def trained_model(
    client: TestClient, worker: Worker, content: bytes | None = None, **params
) -> dict:
    """Upload (default: binary blobs), train in-process, return the model detail."""
    if content is None:
        X, y = blobs()
        content = to_csv(X, y)
    ds = upload(client, content)
    job = submit(client, ds["id"], **{"max_iter": 30, **params})
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    job = client.get(f"/jobs/{job['id']}").json()
    return client.get(f"/models/{job['model_id']}").json()


def assert_png(r) -> bytes:
    assert r.status_code == 200 and r.headers["content-type"] == "image/png", r.text
    assert r.content.startswith(b"\x89PNG")
    return r.content


def assert_svg(r) -> str:
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml"), r.text
    assert r.text.lstrip().startswith(("<?xml", "<svg"))
    return r.text


def assert_problem(r, status: int, field: str | None = None) -> dict:
    """The response is problem+json with ``status``; ``field`` is named in detail and errors."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body = r.json()
    for key in ("type", "title", "status", "detail", "instance"):
        assert key in body, body
    assert body["status"] == status
    if field is not None:
        assert field in body["detail"], body
        assert any(e["field"] == field for e in body.get("errors", [])), body
    return body


@contextmanager
def migrated_database(backend: str, directory: Path) -> Iterator[str]:
    """A new database migrated to head with Alembic: SQLite in ``directory``, or a scratch
    PostgreSQL database (dropped afterwards) on the server of TEST_DATABASE_URL."""
    if backend == "sqlite":
        url = f"sqlite:///{directory / 'test.db'}"
        upgrade_to_head(url)
        yield url
        return
    admin_url = os.environ["TEST_DATABASE_URL"]
    url = create_postgres_database(admin_url)
    try:
        upgrade_to_head(url)
        yield url
    finally:
        drop_postgres_database(admin_url, url)


def stop_workers(procs: list[subprocess.Popen]) -> list[str]:
    """SIGTERM each worker process still running (SIGCONT first: a stopped process cannot
    handle it), then collect their outputs; kill any that does not exit within 30 s."""
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
    outputs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        outputs.append(out)
    return outputs


@contextmanager
def sqlite_write_lock(url: str, hold: float) -> Iterator[threading.Timer]:
    """Another process's view: a connection that holds ``url``'s SQLite write lock
    (BEGIN IMMEDIATE) for ``hold`` seconds, or until the block ends; join the yielded timer
    to wait for the release."""
    import sqlite3

    writer = sqlite3.connect(make_url(url).database, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    release = threading.Timer(hold, writer.rollback)
    release.start()
    try:
        yield release
    finally:
        release.cancel()
        writer.rollback()
        writer.close()


def start_worker_process(
    database_url: str,
    cwd: Path | str,
    *args: str,
    env: dict[str, str] | None = None,
    deployed_defaults: bool = False,
    capture: bool = True,
) -> subprocess.Popen:
    """A real ``msvmav worker`` process (``args`` after ``worker``) on ``database_url``.
    ``env``: MSVMAV_* settings on top; ``deployed_defaults``: none of this process's MSVMAV_*
    variables; ``capture``: stdout and stderr as text (see stop_workers), else discarded."""
    inherited = {
        k: v for k, v in os.environ.items() if not (deployed_defaults and k.startswith("MSVMAV_"))
    }
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "worker", *args],
        cwd=cwd,
        env={**inherited, "MSVMAV_DATABASE_URL": database_url, **(env or {})},
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
    )


def job_finished(client: TestClient, job_id: int, timeout: float = 120.0) -> dict:
    """Poll ``GET /jobs/{id}`` until the job succeeded or failed; its body."""
    return wait_for(
        lambda: (body := client.get(f"/jobs/{job_id}").json())["status"] in ("succeeded", "failed")
        and body,
        timeout=timeout,
        interval=0.1,
    )
