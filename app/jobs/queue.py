"""The job queue's concurrency core: claim a job under a lease, keep the lease with heartbeats,
reap expired leases (re-queue, or fail after too many lost workers), take the jobs of a worker
known dead at once (``release_dead_worker``), record each attempt.

A worker holds a job's lease while ``jobs.worker_id`` is its id, ``status`` is ``running`` and
``heartbeat_at`` is younger than ``lease_seconds``. Every write a worker makes to its job is
conditioned on the first two (``app.jobs.runtime.owned``), so a worker whose lease expired
(SIGKILLed, or frozen by SIGSTOP and later resumed) writes nothing once the job was reaped.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from app.core.db import is_transient
from app.core.orm import utcnow
from app.jobs.orm import Job, JobAttempt
from app.jobs.runtime import Lease, failure_message, owned
from app.jobs.wakeup import announce

log = logging.getLogger("app.jobs.queue")


def claim_next_job(engine: Engine, worker_id: str) -> int | None:
    """Atomically take the oldest queued job; its id, or None when the queue is empty.

    PostgreSQL: ``SELECT … FOR UPDATE SKIP LOCKED`` then ``UPDATE``; SQLite: one conditional
    ``UPDATE … RETURNING`` inside the ``BEGIN IMMEDIATE`` transaction. The claim counts in
    ``attempts`` and opens a ``job_attempts`` row, in the same transaction."""
    now = utcnow()
    claimed = {
        "status": "running",
        "worker_id": worker_id,
        "attempts": Job.attempts + 1,
        "started_at": now,
        "heartbeat_at": now,
        "progress": 0.0,
        "message": "claimed by a worker",
    }
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            job_id = conn.scalar(
                select(Job.id)
                .where(Job.status == "queued")
                .order_by(Job.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            if job_id is None:
                return None
            row = conn.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(**claimed)
                .returning(Job.id, Job.attempts)
            ).one()
        else:
            oldest = (
                select(Job.id)
                .where(Job.status == "queued")
                .order_by(Job.id)
                .limit(1)
                .scalar_subquery()
            )
            row = conn.execute(
                update(Job)
                .where(Job.id == oldest, Job.status == "queued")
                .values(**claimed)
                .returning(Job.id, Job.attempts)
            ).first()
            if row is None:
                return None
        conn.execute(
            insert(JobAttempt).values(
                job_id=row.id,
                number=row.attempts,
                worker_id=worker_id,
                started_at=now,
                outcome="running",
            )
        )
        return row.id


def end_attempt(conn: Connection, job_id: int, worker_id: str, outcome: str) -> None:
    """Close the open attempt of ``worker_id`` on ``job_id`` (in the caller's transaction)."""
    conn.execute(
        update(JobAttempt)
        .where(
            JobAttempt.job_id == job_id,
            JobAttempt.worker_id == worker_id,
            JobAttempt.finished_at.is_(None),
        )
        .values(finished_at=utcnow(), outcome=outcome)
    )


def reap_expired_jobs(engine: Engine, lease_seconds: float, max_attempts: int) -> int:
    """Take running jobs whose lease expired (no heartbeat for ``lease_seconds``) from their
    worker: re-queue each, or — when this is its ``max_attempts``-th lost worker — fail it
    (a job that kills its worker, out of memory say, would otherwise kill them all); a job
    with a cancel request ends cancelled. Returns how many were taken.

    A database outage is not a lost worker: on PostgreSQL nothing is taken while the server
    has been up for less than ``lease_seconds`` (``pg_postmaster_start_time``). While it was
    down no worker could renew a lease, so every running job's heartbeat may be older than the
    lease when it is back; its worker, alive, renews it within ``lease_seconds`` of the start
    (its heartbeat retries every 0.5 s), and only a worker that does not is lost.

    Safe with several reapers: each job is updated only if it is still running under the same
    worker with the same expired heartbeat (and, on PostgreSQL, rows locked by another reaper
    are skipped)."""
    now = utcnow()
    cutoff = now - timedelta(seconds=lease_seconds)
    why = f"stopped heartbeating for more than {lease_seconds:g} s"
    with engine.begin() as conn:
        if _server_started_after(conn, cutoff):
            return 0
        expired = Job.heartbeat_at < cutoff
        jobs = _running(conn, expired)
        return sum(_take(conn, job, now, why, max_attempts, expired) for job in jobs)


def release_dead_worker(engine: Engine, worker_id: str, how: str, max_attempts: int) -> int:
    """Take the running jobs of ``worker_id``, whose process is known to be gone (``how``: "was
    killed by SIGKILL", say), at once rather than at its lease's end, as ``reap_expired_jobs``
    does: re-queued, or failed at its ``max_attempts``-th lost worker. ``msvmav serve`` calls
    it when an embedded worker dies. Returns how many were taken."""
    with engine.begin() as conn:
        jobs = _running(conn, Job.worker_id == worker_id)
        return sum(_take(conn, job, utcnow(), how, max_attempts) for job in jobs)


def _running(conn: Connection, condition: Any) -> list[Any]:
    """The running jobs that meet ``condition`` (rows locked by another reaper skipped)."""
    stmt = select(Job.id, Job.worker_id, Job.cancel_requested).where(
        Job.status == "running", condition
    )
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    return list(conn.execute(stmt).all())


def _take(
    conn: Connection, job: Any, now: datetime, why: str, max_attempts: int, *still: Any
) -> int:
    """Take ``job`` from its worker (which ``why``): 1 if it was still that worker's (and met
    ``still``), 0 otherwise. Its attempt ends ``lost``."""
    lost = 1 + conn.scalar(
        select(func.count())
        .select_from(JobAttempt)
        .where(JobAttempt.job_id == job.id, JobAttempt.outcome == "lost")
    )
    values = _reaped_values(job.worker_id, job.cancel_requested, lost, now, why, max_attempts)
    done = conn.execute(
        update(Job).where(*owned(job.id, job.worker_id), *still).values(**values)
    ).rowcount
    if not done:
        return 0
    end_attempt(conn, job.id, job.worker_id, "lost")
    if values["status"] == "queued":
        announce(conn)
    log.warning("job %s lost its worker %s (%s): %s", job.id, job.worker_id, why, values["status"])
    return 1


def _server_started_after(conn: Connection, moment: datetime) -> bool:
    """Whether the database server (re)started after ``moment``: PostgreSQL's postmaster start
    time; never on SQLite (a file: no server to restart, a lock is waited for instead)."""
    if conn.dialect.name != "postgresql":
        return False
    started = conn.scalar(text("SELECT pg_postmaster_start_time()"))
    return started is not None and started > moment


def _reaped_values(
    worker_id: str | None,
    cancel_requested: bool,
    lost: int,
    now: datetime,
    why: str,
    max_attempts: int,
) -> dict[str, object]:
    if cancel_requested:
        return {
            "status": "cancelled",
            "finished_at": now,
            "message": "cancelled: its worker stopped while the cancel was pending",
        }
    if lost >= max_attempts:
        error = (
            f"the job killed its worker {lost} times (the last time its worker {why}; e.g. "
            f"killed out of memory); not retried after {max_attempts} attempts "
            "(MSVMAV_MAX_ATTEMPTS)"
        )
        return {
            "status": "failed",
            "finished_at": now,
            "message": failure_message(error),
            "error": error,
        }
    return {
        "status": "queued",
        "worker_id": None,
        "started_at": None,
        "heartbeat_at": None,
        "progress": 0.0,
        "message": f"re-queued: worker {worker_id} {why} "
        f"(lost {lost} of at most {max_attempts} times)",
    }


class Heartbeat:
    """Background thread stamping ``heartbeat_at`` (renewing the lease) while a job runs: a
    single long iteration, or data loading, must not make the job look abandoned."""

    def __init__(self, engine: Engine, job_id: int, worker_id: str, interval: float,
                 lease: Lease | None = None) -> None:
        self.engine = engine
        self.job_id = job_id
        self.worker_id = worker_id
        self.interval = interval
        self.lease = lease  # renewed by each beat that reaches the job while it is ours
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        # After a failed beat (the database away) the next one comes sooner: the lease is
        # renewed as soon as the database is back, before another worker's reaper looks.
        wait = self.interval
        while not self._done.wait(wait):
            try:
                with self.engine.begin() as conn:
                    beat = conn.execute(
                        update(Job)
                        .where(*owned(self.job_id, self.worker_id))
                        .values(heartbeat_at=utcnow())
                    ).rowcount
                if beat and self.lease is not None:
                    self.lease.renewed()
                wait = self.interval
            except SQLAlchemyError as exc:  # a missed beat is not fatal; the next one may do
                if not is_transient(exc):
                    log.exception("heartbeat of job %s failed", self.job_id)
                else:
                    log.warning(
                        "heartbeat of job %s: database unavailable (%s)",
                        self.job_id,
                        type(exc).__name__,
                    )
                wait = min(self.interval, 0.5)
            except Exception:
                log.exception("heartbeat of job %s failed", self.job_id)
