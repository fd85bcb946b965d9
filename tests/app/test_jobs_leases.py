"""Leases in-process: an expired lease re-queues the job (its attempt ends ``lost``), the
``max_attempts``-th loss fails it, a worker that lost its lease writes nothing, the attempt
history on GET /jobs/{id}, the liveness stamp and ``msvmav worker --check``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from app.core.config import Settings
from app.core.db import make_session_factory
from app.core.orm import utcnow
from app.datasets.orm import Dataset
from app.jobs.orm import Job
from app.jobs.queue import reap_expired_jobs
from app.jobs.registry import get_runner
from app.jobs.runtime import JobContext, ProgressReporter
from app.jobs.worker import Worker, _succeed, check_alive, claim_next_job
from app.models.orm import Model
from app.training.runner import training_rows
from tests.app.support import blobs, run_jobs, submit, to_csv, upload


def _expire(engine, job_id: int, seconds: float = 120) -> None:
    """As if the job's worker stopped heartbeating ``seconds`` ago."""
    with engine.begin() as conn:
        conn.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(heartbeat_at=utcnow() - timedelta(seconds=seconds))
        )


def _models(engine, job_id: int) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(Model).where(Model.job_id == job_id))


def test_expired_lease_requeues_and_another_worker_completes(client, engine, worker):
    ds = upload(client, to_csv(*blobs(n=40)))
    job = submit(client, ds["id"], max_iter=20)
    assert claim_next_job(engine, "host:1:dead") == job["id"]
    _expire(engine, job["id"], seconds=11)
    assert reap_expired_jobs(engine, lease_seconds=10, max_attempts=3) == 1
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "queued" and body["worker_id"] is None and body["error"] is None
    assert "re-queued" in body["message"] and "host:1:dead" in body["message"]
    assert run_jobs(worker) == ["succeeded"]
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "succeeded" and body["attempts"] == 2
    history = body["attempt_history"]
    assert [(a["number"], a["worker_id"], a["outcome"]) for a in history] == [
        (1, "host:1:dead", "lost"),
        (2, worker.worker_id, "succeeded"),
    ]
    assert all(a["started_at"] <= a["finished_at"] for a in history)
    assert _models(engine, job["id"]) == 1


def test_lease_not_yet_expired_is_kept(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    job = submit(client, ds["id"])
    claim_next_job(engine, "host:1:slow")
    _expire(engine, job["id"], seconds=5)
    assert reap_expired_jobs(engine, lease_seconds=10, max_attempts=3) == 0
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "running"
    assert body["attempt_history"][0]["outcome"] == "running"
    assert body["attempt_history"][0]["finished_at"] is None


def test_job_that_keeps_killing_its_worker_fails_after_max_attempts(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    job = submit(client, ds["id"])
    for n in (1, 2, 3):
        assert claim_next_job(engine, f"host:{n}:dead") == job["id"]
        _expire(engine, job["id"])
        assert reap_expired_jobs(engine, lease_seconds=10, max_attempts=3) == 1
        status = client.get(f"/jobs/{job['id']}").json()["status"]
        assert status == ("failed" if n == 3 else "queued")
    body = client.get(f"/jobs/{job['id']}").json()
    assert "killed its worker 3 times" in body["error"]
    assert body["finished_at"] is not None and body["attempts"] == 3
    assert [a["outcome"] for a in body["attempt_history"]] == ["lost"] * 3
    assert claim_next_job(engine, "host:4:new") is None  # not queued again


def test_shutdown_requeues_do_not_count_as_lost_workers(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    job = submit(client, ds["id"])
    # two graceful put-backs (SIGTERM), then one lost worker: still re-queued with max 2
    from app.jobs.worker import _requeue

    for n in (1, 2):
        claim_next_job(engine, f"host:{n}:stopping")
        assert _requeue(engine, job["id"], f"host:{n}:stopping") == "queued"
    claim_next_job(engine, "host:3:dead")
    _expire(engine, job["id"])
    reap_expired_jobs(engine, lease_seconds=10, max_attempts=2)
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "queued", body
    assert [a["outcome"] for a in body["attempt_history"]] == ["requeued", "requeued", "lost"]


def test_worker_that_lost_its_lease_writes_no_model(client, engine, settings, worker):
    """A frozen worker resumes after its job was re-queued and completed elsewhere: its result
    write is refused (it no longer holds the lease) and the job keeps exactly one model."""
    ds = upload(client, to_csv(*blobs(n=40)))
    job = submit(client, ds["id"], max_iter=20)
    frozen = "host:1:frozen"
    assert claim_next_job(engine, frozen) == job["id"]
    sessions = make_session_factory(engine)
    with sessions() as session:
        params = dict(session.get(Job, job["id"]).params)
    reporter = ProgressReporter(engine, job["id"], frozen, 0.0, threading.Event())
    ctx = JobContext(engine, sessions, job["id"], frozen, params, ds["id"], reporter, settings)
    result = get_runner("train")(ctx)  # fitted, not yet written ... then the worker froze
    _expire(engine, job["id"])
    reap_expired_jobs(engine, lease_seconds=10, max_attempts=3)
    assert run_jobs(worker) == ["succeeded"]
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    assert _succeed(engine, sessions, job["id"], frozen, result) == "lost"
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "succeeded" and body["model_id"] == model_id
    assert body["worker_id"] == worker.worker_id
    assert _models(engine, job["id"]) == 1
    assert [a["outcome"] for a in body["attempt_history"]] == ["lost", "succeeded"]


def test_running_message_counts_training_rows_not_dataset_rows():
    # issue 10 item 8: 45211 rows with a 20 % hold-out train on 36168
    dataset = Dataset(n_rows=45211, n_features=16)
    assert training_rows(dataset, 0.2) == "36168 training rows (9043 held out)"
    assert training_rows(dataset, None) == "45211 rows"


def test_settings_refuse_a_lease_shorter_than_two_heartbeats():
    with pytest.raises(ValueError, match="lease_seconds"):
        Settings(heartbeat_interval=5, lease_seconds=6, _env_file=None)
    assert Settings(_env_file=None).lease_seconds == 10


# --- liveness ------------------------------------------------------------------------------


def _check(path, url: str, max_age: float | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MSVMAV_WORKER_ALIVE_FILE": str(path), "MSVMAV_DATABASE_URL": url}
    args = [sys.executable, "-m", "app.cli.main", "worker", "--check"]
    if max_age is not None:
        args += ["--max-age", str(max_age)]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


def test_worker_loop_touches_its_alive_file(settings, engine, tmp_path):
    path = tmp_path / "alive"
    worker = Worker(settings.model_copy(update={"worker_alive_file": str(path)}), engine=engine)
    assert not path.exists()
    assert worker.run_once() is None  # idle loop
    assert path.exists() and time.time() - path.stat().st_mtime < 5
    assert check_alive(str(path), 5)[0]


def test_worker_that_cannot_reach_its_database_does_not_touch_it(tmp_path):
    path = tmp_path / "alive"
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'missing-dir' / 'db.sqlite'}",
        worker_alive_file=str(path),
        _env_file=None,
    )
    worker = Worker(settings)
    with pytest.raises(Exception, match="unable to open database"):
        worker.run_once()
    worker.engine.dispose()
    assert not path.exists()


def test_check_command_fails_for_a_stalled_or_absent_worker(tmp_path, database_url):
    path = tmp_path / "alive"
    r = _check(path, database_url)
    assert r.returncode == 1 and "does not exist" in r.stderr
    path.touch()
    r = _check(path, database_url)
    assert r.returncode == 0, r.stderr
    stalled = time.time() - 300
    os.utime(path, (stalled, stalled))
    r = _check(path, database_url)  # default max age 120 s
    assert r.returncode == 1 and "stalled" in r.stderr
    assert _check(path, database_url, max_age=600).returncode == 0
