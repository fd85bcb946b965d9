"""Leases with real worker processes (``msvmav worker``): SIGKILL a worker mid-job and another
finishes it; a job that kills every worker fails after MSVMAV_MAX_ATTEMPTS; a worker frozen
with SIGSTOP and resumed with SIGCONT writes nothing. Short leases keep the tests quick (the
defaults are measured in bench/worker_failover.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time

from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from app.models.orm import Model
from tests.app.support import (
    blobs,
    job_finished,
    start_worker_process,
    stop_workers,
    submit,
    to_csv,
    upload,
    wait_for,
)
from tests.wait_support import wait_until

LEASE = {"MSVMAV_HEARTBEAT_INTERVAL": "0.5", "MSVMAV_LEASE_SECONDS": "3"}
# A fit of about two seconds: long enough to be interrupted, short enough to be run twice. No
# calibration: its five cross-validated folds would make the fit that runs to the end ~5x
# dearer, and what is interrupted (the fit loop, its callback and heartbeats) is the same.
LONG_FIT = {"max_iter": 30_000, "tol": 0, "calibration": "none"}


def start_worker(database_url: str, tmp_path, **env: str) -> subprocess.Popen:
    alive = tmp_path / f"alive-{time.monotonic_ns()}"
    settings = {
        "MSVMAV_WORKER_POLL_INTERVAL": "0.1",
        "MSVMAV_CANCEL_CHECK_INTERVAL": "0.05",
        "MSVMAV_WORKER_ALIVE_FILE": str(alive),
        **LEASE,
        **env,
    }
    proc = start_worker_process(database_url, tmp_path, env=settings)
    proc.alive_file = alive  # type: ignore[attr-defined]
    return proc


def freeze(proc: subprocess.Popen, database_url: str) -> None:
    """SIGSTOP ``proc``. On SQLite, at a moment it holds no write lock: a process frozen inside a
    write transaction (a heartbeat, say) keeps the database file locked for every other
    process until it resumes — SQLite's limit, not the lease's (docs/jobs.md) — so a freeze that
    lands inside one is undone and tried again a moment later."""
    url = make_url(database_url)

    def frozen_outside_a_write() -> bool:
        os.kill(proc.pid, signal.SIGSTOP)
        if url.get_backend_name() != "sqlite":
            return True
        con = sqlite3.connect(url.database, timeout=0.5)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.rollback()
            return True
        except sqlite3.OperationalError:  # frozen holding the lock: let it go on a moment
            os.kill(proc.pid, signal.SIGCONT)
            return False
        finally:
            con.close()

    wait_until(frozen_outside_a_write, timeout=60, interval=0.05,
               message="could not freeze the worker outside a write transaction")


def running_under(client, job_id: int, pid: int) -> bool:
    """The job runs (and has reported progress) in the worker process ``pid``."""
    body = client.get(f"/jobs/{job_id}").json()
    return (
        body["status"] == "running"
        and body["progress"] > 0
        and f":{pid}:" in (body["worker_id"] or "")
    )


def n_models(engine, job_id: int) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(Model).where(Model.job_id == job_id))


def long_job(client) -> dict:
    ds = upload(client, to_csv(*blobs(n=3000, d=40, seed=1, shift=0.3)))
    return submit(client, ds["id"], **LONG_FIT)


def test_sigkilled_workers_job_is_requeued_and_completed_by_another(
    client, engine, database_url, tmp_path
):
    job = long_job(client)
    a = start_worker(database_url, tmp_path)
    procs = [a]
    outputs: list[str] = []
    try:
        wait_for(lambda: running_under(client, job["id"], a.pid), timeout=60, interval=0.05)
        b = start_worker(database_url, tmp_path)
        procs.append(b)
        a.kill()  # SIGKILL: no clean-up, no re-queue by the worker itself
        a.wait()
        killed = time.monotonic()
        wait_for(lambda: client.get(f"/jobs/{job['id']}").json()["attempts"] == 2, timeout=30,
                 interval=0.05)
        requeued_after = time.monotonic() - killed
        body = job_finished(client, job["id"])
    finally:
        outputs = stop_workers(procs)
    assert body["status"] == "succeeded", (body, outputs)
    assert requeued_after < 3 + 0.5 + 5  # lease + one reap interval + slack for a busy host
    history = body["attempt_history"]
    assert [h["outcome"] for h in history] == ["lost", "succeeded"]
    assert f":{a.pid}:" in history[0]["worker_id"] and f":{b.pid}:" in history[1]["worker_id"]
    assert body["worker_id"] == history[1]["worker_id"]
    assert n_models(engine, job["id"]) == 1


def test_job_that_kills_every_worker_fails_after_max_attempts(
    client, engine, database_url, tmp_path
):
    job = long_job(client)
    procs = [start_worker(database_url, tmp_path, MSVMAV_MAX_ATTEMPTS="2")]
    try:
        for _ in range(2):
            running = procs[-1]
            wait_for(lambda p=running: running_under(client, job["id"], p.pid), timeout=60)
            # the next worker starts while this one runs (it cannot take a job under a live
            # lease): it takes the job over once the lease expires, or after the second kill
            # it is the reaper that fails the job
            procs.append(start_worker(database_url, tmp_path, MSVMAV_MAX_ATTEMPTS="2"))
            running.kill()
            running.wait()
        body = wait_for(
            lambda: (b := client.get(f"/jobs/{job['id']}").json())["status"] != "running" and b,
            timeout=30,
            interval=0.1,
        )
    finally:
        stop_workers(procs)
    assert body["status"] == "failed", body
    assert "killed its worker 2 times" in body["error"]
    assert body["attempts"] == 2
    assert [h["outcome"] for h in body["attempt_history"]] == ["lost", "lost"]
    assert n_models(engine, job["id"]) == 0


def test_frozen_worker_that_resumes_writes_nothing(client, engine, database_url, tmp_path):
    job = long_job(client)
    a = start_worker(database_url, tmp_path)
    procs = [a]
    outputs: list[str] = []
    try:
        wait_for(lambda: running_under(client, job["id"], a.pid), timeout=60, interval=0.05)
        b = start_worker(database_url, tmp_path)
        procs.append(b)
        freeze(a, database_url)
        # b takes the job over once a's lease expires and runs it to the end
        body = wait_for(
            lambda: (j := client.get(f"/jobs/{job['id']}").json())["status"] == "succeeded" and j,
            timeout=120,
            interval=0.1,
        )
        resumed = time.time()
        os.kill(a.pid, signal.SIGCONT)
        # a's fit callback moves again (it touches its alive file), then finds the job gone
        wait_for(lambda: a.alive_file.stat().st_mtime >= resumed, timeout=30, interval=0.05)
        # a resumes mid-fit: its next progress write finds the job no longer its own
        history = wait_for(
            lambda: (
                (h := client.get(f"/jobs/{job['id']}").json()["attempt_history"])
                and h[0]["outcome"] == "lost"
                and h
            ),
            timeout=10,
            interval=0.05,
        )
        # a's exit ends everything it could write: the job is read once a has exited (its
        # output, checked below, says it discarded the result: the job was taken from it)
        outputs += stop_workers([a])
        procs.remove(a)
        after = client.get(f"/jobs/{job['id']}").json()
    finally:
        outputs += stop_workers(procs)
    assert f":{b.pid}:" in body["worker_id"]
    assert after == {**body, "attempt_history": history}  # nothing changed since it succeeded
    assert [h["outcome"] for h in history] == ["lost", "succeeded"]
    assert n_models(engine, job["id"]) == 1
    assert "taken from this worker" in outputs[0], outputs[0]
