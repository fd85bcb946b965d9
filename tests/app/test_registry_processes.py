"""The registry across processes: an ``msvmav serve`` sees an alias move made by another
process (the test's own app) on the same database at its next request and never mixes versions
in one answer; a worker killed between its fit and its commit registers nothing, and the
retried job registers exactly one version (SQLite, and PostgreSQL when TEST_DATABASE_URL is
set)."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import psutil
import pytest
from sqlalchemy import create_engine, func, select, text, update
from sqlalchemy.orm import Session

from app.core.db import is_sqlite
from app.core.orm import utcnow
from app.jobs.orm import Job
from app.jobs.worker import Worker
from app.models.orm import Model
from app.registry.orm import ModelVersion
from tests.app.support import (
    blobs,
    running_job,
    sqlite_write_lock,
    start_worker_process,
    submit,
    to_csv,
    trained_model,
    upload,
    wait_for,
)
from tests.live_server import ROOT, live_server

X, Y = blobs()
ROWS = X[:8].tolist()


def _call(url: str, method: str = "GET", body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        # one request id: the rows' default ids ("{request_id}:{row}") equal between answers
        headers={"content-type": "application/json", "X-Request-ID": "same"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.loads(r.read())


def test_two_api_processes_see_an_alias_move_at_their_next_request(
    client, worker, database_url, tmp_path
):
    ids = [trained_model(client, worker)["id"], trained_model(client, worker, alpha=0.01)["id"]]
    client.post("/registered-models", json={"name": "credit"})
    for i in ids:
        client.post("/registered-models/credit/versions", json={"model_id": i})
    client.put("/registered-models/credit/aliases/production", json={"version": 1})
    expected = {
        i: client.post(
            "/predict", json={"model_id": i, "instances": ROWS}, headers={"X-Request-ID": "same"}
        ).json()["predictions"]
        for i in ids
    }
    assert expected[ids[0]] != expected[ids[1]]
    # A, which moves the alias, is this process's app (``client``): a process other than B's,
    # on the same database, and one ``msvmav serve`` fewer to start (~3 s of CPU).
    # B reads the alias on every request (SQLite's default; a longer window's bound:
    # tests/app/test_serving_recheck.py)
    env = {"MSVMAV_DATABASE_URL": database_url, "MSVMAV_SERVE_RECHECK_SECONDS": "0"}
    with live_server(tmp_path, **env) as b:
        by_alias = {"model": "credit@production", "instances": ROWS}
        # both hold version 1 in their caches now
        r = client.post("/predict", json=by_alias, headers={"X-Request-ID": "same"})
        assert r.json()["model_id"] == ids[0]
        assert _call(b.url + "/predict", "POST", by_alias)["model_id"] == ids[0]
        answers: list[dict] = []
        stop, answered = threading.Event(), threading.Event()

        def hammer() -> None:  # B answers throughout the moves below
            while not stop.is_set():
                answers.append(_call(b.url + "/predict", "POST", by_alias))
                answered.set()

        thread = threading.Thread(target=hammer)
        thread.start()
        try:
            for version in (2, 1, 2, 1, 2):
                moved_by_a = client.put(
                    "/registered-models/credit/aliases/production", json={"version": version}
                )
                assert moved_by_a.status_code == 200, moved_by_a.text
                moved = time.monotonic()
                seen = _call(b.url + "/predict", "POST", by_alias)
                assert time.monotonic() - moved < 1.0
                # B's very next request after the move uses the new version
                assert (seen["model_id"], seen["version"]) == (ids[version - 1], version)
                assert seen["predictions"] == expected[ids[version - 1]]
                answered.clear()  # the hammer answers at least once between two moves
                assert answered.wait(30)
        finally:
            stop.set()
            thread.join(60)
    assert len(answers) >= 5
    for answer in answers:  # one version per answer, never a mixture
        version = answer["version"]
        assert answer["model_id"] == ids[version - 1] and answer["alias"] == "production"
        assert answer["predictions"] == expected[answer["model_id"]]


@contextmanager
def _commit_blocked(database_url: str) -> Iterator[None]:
    """Writes to registered model 'wdbc' wait while the block runs: on SQLite every write (the
    write lock), on PostgreSQL those that lock the registered model's row."""
    if is_sqlite(database_url):
        with sqlite_write_lock(database_url, hold=300):
            yield
        return
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT id FROM registered_models WHERE name = 'wdbc' FOR UPDATE"))
            yield
            conn.rollback()
    finally:
        engine.dispose()


def _waiting_for_a_lock(engine) -> bool:
    """PostgreSQL: one backend of this database waits for a lock on registered_models (not
    one of another test process's database on the same server)."""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database() AND query LIKE '%registered_models%'"
                )
            ).scalar()
        )


def _idle(pid: int, seconds: float = 1.5) -> Callable[[], bool]:
    """A condition: the process used no CPU over the last ``seconds`` (it waits for a lock),
    from the samples of its CPU time taken at each ask."""
    process = psutil.Process(pid)
    samples: list[tuple[float, float]] = []

    def idle() -> bool:
        now, cpu = time.monotonic(), sum(process.cpu_times()[:2])
        samples.append((now, cpu))
        old = [i for i, (t, _) in enumerate(samples) if now - t >= seconds]
        if not old:
            return False
        del samples[: old[-1]]  # the newest sample a window old is the base
        return cpu - samples[0][1] < 0.02

    return idle


def test_a_worker_killed_between_fit_and_commit_registers_nothing(
    client, engine, settings, database_url, tmp_path
):
    ds = upload(client, to_csv(*blobs(n=3000, d=40, seed=1, shift=0.3)))
    client.post("/registered-models", json={"name": "wdbc"})
    job = submit(client, ds["id"], max_iter=2000, tol=0, register_as="wdbc")
    # No progress write, heartbeat or lease expiry during the fit after its first iteration:
    # once that iteration is reported, the worker's only write is its final transaction.
    quiet = {
        "MSVMAV_CANCEL_CHECK_INTERVAL": "600",
        "MSVMAV_HEARTBEAT_INTERVAL": "600",
        "MSVMAV_LEASE_SECONDS": "1200",
        "MSVMAV_WORKER_POLL_INTERVAL": "0.05",
    }
    proc = start_worker_process(database_url, ROOT, env=quiet, capture=False)
    try:
        wait_for(lambda: client.get(f"/jobs/{job['id']}").json()["progress"] > 0, timeout=120)
        with _commit_blocked(database_url):
            wait_for(_idle(proc.pid), timeout=300, interval=0.1)
            if not is_sqlite(database_url):  # its transaction waits for the row lock
                assert _waiting_for_a_lock(engine)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    body = client.get(f"/jobs/{job['id']}").json()
    assert (body["status"], body["model_id"], body["attempts"]) == ("running", None, 1)
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Model)) == 0
        assert session.scalar(select(func.count()).select_from(ModelVersion)) == 0
    # The lease expires; another worker re-queues the job and runs it again.
    retry = Worker(
        settings.model_copy(update={"lease_seconds": 1.0, "heartbeat_interval": 0.25}),
        engine=engine,
    )
    with Session(engine) as session:  # its last heartbeat, a lease and more ago
        session.execute(update(Job).where(Job.id == job["id"])
                        .values(heartbeat_at=utcnow() - timedelta(seconds=5)))
        session.commit()
    assert retry.run_once() == "succeeded"
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["attempts"] == 2 and body["result"]["registered_as"] == {
        "name": "wdbc",
        "version": 1,
    }
    with Session(engine) as session:
        versions = list(session.scalars(select(ModelVersion)))
        assert [(v.version, v.model_id) for v in versions] == [(1, body["model_id"])]
        assert session.scalar(select(func.count()).select_from(Model)) == 1


def test_a_job_cancelled_while_its_commit_waits_registers_nothing(
    client, engine, worker, database_url
):
    """PostgreSQL: the worker's final transaction (model rows written, waiting for the
    registered model's row) is refused when the job was cancelled meanwhile: no model, no
    version."""
    if is_sqlite(database_url):
        pytest.skip("a cancel needs SQLite's write lock too: it cannot land while a commit waits")
    ds = upload(client, to_csv(X, Y))
    client.post("/registered-models", json={"name": "wdbc"})
    job = submit(client, ds["id"], max_iter=20, register_as="wdbc")
    locker = create_engine(database_url)
    try:
        with locker.connect() as conn:
            conn.execute(text("SELECT id FROM registered_models WHERE name = 'wdbc' FOR UPDATE"))
            with running_job(engine, worker) as (job_id, statuses):
                wait_for(lambda: _waiting_for_a_lock(engine), timeout=60)
                assert client.post(f"/jobs/{job_id}/cancel").status_code == 202
                conn.rollback()  # the worker's commit goes on, and finds the job cancelled
    finally:
        locker.dispose()
    assert job_id == job["id"] and statuses == ["cancelled"]
    assert client.get(f"/jobs/{job_id}").json()["model_id"] is None
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Model)) == 0
        assert session.scalar(select(func.count()).select_from(ModelVersion)) == 0
