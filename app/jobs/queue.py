"""The job queue's concurrency core: claim a job under a lease, keep the lease with heartbeats,
reap expired leases (re-queue, or fail after too many lost workers), record each attempt.

A worker holds a job's lease while ``jobs.worker_id`` is its id, ``status`` is ``running`` and
``heartbeat_at`` is younger than ``lease_seconds``. Every write a worker makes to its job is
conditioned on the first two (``app.jobs.runtime.owned``), so a worker whose lease expired
(SIGKILLed, or frozen by SIGSTOP and later resumed) writes nothing once the job was reaped.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from app.core.db import is_transient
from app.core.orm import utcnow
from app.jobs.orm import Job, JobAttempt
from app.jobs.runtime import failure_message, owned
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

    Safe with several reapers: each job is updated only if it is still running under the same
    worker with the same expired heartbeat (and, on PostgreSQL, rows locked by another reaper
    are skipped)."""
    now = utcnow()
    cutoff = now - timedelta(seconds=lease_seconds)
    taken = 0
    with engine.begin() as conn:
        stmt = select(Job.id, Job.worker_id, Job.cancel_requested).where(
            Job.status == "running", Job.heartbeat_at < cutoff
        )
        if conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update(skip_locked=True)
        for job in conn.execute(stmt).all():
            lost = 1 + conn.scalar(
                select(func.count())
                .select_from(JobAttempt)
                .where(JobAttempt.job_id == job.id, JobAttempt.outcome == "lost")
            )
            values = _reaped_values(
                job.worker_id, job.cancel_requested, lost, now, lease_seconds, max_attempts
            )
            done = conn.execute(
                update(Job)
                .where(*owned(job.id, job.worker_id), Job.heartbeat_at < cutoff)
                .values(**values)
            ).rowcount
            if done:
                end_attempt(conn, job.id, job.worker_id, "lost")
                taken += 1
                if values["status"] == "queued":
                    announce(conn)
                log.warning(
                    "job %s lost its worker %s (no heartbeat for %g s): %s",
                    job.id,
                    job.worker_id,
                    lease_seconds,
                    values["status"],
                )
    return taken


def _reaped_values(
    worker_id: str | None,
    cancel_requested: bool,
    lost: int,
    now: datetime,
    lease_seconds: float,
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
            f"the job killed its worker {lost} times (each time the worker stopped "
            f"heartbeating for more than {lease_seconds:g} s, e.g. killed out of memory); not "
            f"retried after {max_attempts} attempts (MSVMAV_MAX_ATTEMPTS)"
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
        "message": f"re-queued: worker {worker_id} stopped heartbeating for more than "
        f"{lease_seconds:g} s (lost {lost} of at most {max_attempts} times)",
    }


class Heartbeat:
    """Background thread stamping ``heartbeat_at`` (renewing the lease) while a job runs: a
    single long iteration, or data loading, must not make the job look abandoned."""

    def __init__(self, engine: Engine, job_id: int, worker_id: str, interval: float) -> None:
        self.engine = engine
        self.job_id = job_id
        self.worker_id = worker_id
        self.interval = interval
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
                    conn.execute(
                        update(Job)
                        .where(*owned(self.job_id, self.worker_id))
                        .values(heartbeat_at=utcnow())
                    )
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
