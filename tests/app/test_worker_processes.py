"""Real worker processes (``msvmav worker``) sharing one database."""

from __future__ import annotations

import signal
import subprocess

from sqlalchemy import func, select

from app.jobs.orm import Job
from app.models.orm import Model
from tests.app.support import blobs, start_worker_process, stop_workers, submit, to_csv, upload
from tests.wait_support import wait_until


def _start_worker(database_url: str, tmp_path) -> subprocess.Popen:
    fast = {"MSVMAV_WORKER_POLL_INTERVAL": "0.05", "MSVMAV_CANCEL_CHECK_INTERVAL": "0.05"}
    return start_worker_process(database_url, tmp_path, env=fast)


def _wait(predicate, timeout: float = 90.0) -> None:
    wait_until(predicate, timeout=timeout, interval=0.1)


def test_two_worker_processes_run_each_of_20_jobs_exactly_once(
    client, engine, database_url, tmp_path
):
    ds = upload(client, to_csv(*blobs(n=40)))
    job_ids = [submit(client, ds["id"], max_iter=5, seed=i)["id"] for i in range(20)]
    procs = [_start_worker(database_url, tmp_path) for _ in range(2)]
    try:

        def all_done() -> bool:
            with engine.connect() as conn:
                open_jobs = conn.scalar(
                    select(func.count())
                    .select_from(Job)
                    .where(Job.status.in_(("queued", "running")))
                )
            return open_jobs == 0

        _wait(all_done)
    finally:
        outputs = stop_workers(procs)
    assert [p.returncode for p in procs] == [0, 0], outputs
    with engine.connect() as conn:
        rows = conn.execute(select(Job.id, Job.status, Job.attempts, Job.model_id)).all()
        n_models = conn.scalar(select(func.count()).select_from(Model))
        model_jobs = list(conn.scalars(select(Model.job_id)))
    assert sorted(r.id for r in rows) == sorted(job_ids)
    assert {r.status for r in rows} == {"succeeded"}
    assert all(r.attempts == 1 for r in rows)  # each job claimed exactly once
    assert n_models == 20 and sorted(model_jobs) == sorted(job_ids)  # and run exactly once


def test_sigterm_puts_the_running_job_back_and_exits_cleanly(
    client, engine, database_url, tmp_path
):
    ds = upload(client, to_csv(*blobs(n=3000, d=40, seed=1, shift=0.3)))
    job = submit(client, ds["id"], max_iter=1_000_000, tol=0)
    proc = _start_worker(database_url, tmp_path)
    try:

        def fitting() -> bool:
            body = client.get(f"/jobs/{job['id']}").json()
            return body["status"] == "running" and body["progress"] > 0

        _wait(fitting, timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "queued" and body["worker_id"] is None
    assert body["attempts"] == 1
    assert client.post(f"/jobs/{job['id']}/cancel").json()["status"] == "cancelled"
