"""What a job runner sees while it runs in a worker: its context, the progress/cancel callback
and the result it hands back. Free of domain imports, so each domain's runner (training in
``app.training.runner``, experiments in ``app.experiments.runner``) imports it without a cycle."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import is_transient
from app.core.orm import utcnow
from app.jobs.orm import Job

log = logging.getLogger("app.jobs.runtime")



class JobCancelledError(Exception):
    """The job's cancel flag was set."""


class JobLostError(Exception):
    """The job is no longer ours (its lease expired and it was re-queued or failed)."""


class WorkerStoppingError(Exception):
    """The worker was asked to shut down."""


def owned(job_id: int, worker_id: str) -> list[Any]:
    """WHERE clauses: the job is running and still this worker's (it holds the lease). Every
    write of a running job goes through them, so a worker that lost its lease writes nothing."""
    return [Job.id == job_id, Job.worker_id == worker_id, Job.status == "running"]


def running_progress(fraction: float) -> float:
    """``fraction`` clamped to [0, 0.99]: only a finished job shows 1."""
    return min(max(fraction, 0.0), 0.99)


def describe_iteration(info: dict[str, Any]) -> tuple[float, str]:
    """Progress in [0, 0.99] and a message from a solver callback ``info`` dict."""
    k = int(info.get("iteration", 0))
    t = max(int(info.get("max_iter", 1) or 1), 1)
    task = int(info.get("task", 0))
    n_tasks = max(int(info.get("n_tasks", 1) or 1), 1)
    progress = running_progress((task + min(k, t) / t) / n_tasks)
    head = f"task {task + 1}/{n_tasks}, iteration {k}/{t}"
    if info.get("stage") == "kernel_inverse":  # before the iterations: the exact kernel's set-up
        done, of = int(info.get("done", 0)), int(info.get("of", 0))
        what = f"inverting I + K, {done}/{of} pivots" if done else "computing the Gram matrix"
        return progress, f"{head}: exact kernel, {what}"
    if info.get("stage") == "active_set":  # a large refactorisation inside an iteration
        return progress, f"{head}: refactoring the active set's system, {info.get('done')} pivots"
    values = [
        f"{name}={info[key]:.6g}"
        for key, name in (("theta", "θ̂"), ("objective", "SV/θ̂²"))
        if isinstance(info.get(key), int | float)
    ]
    return progress, f"{head}: {', '.join(values)}" if values else head


class Lease:
    """This worker's view of its job's lease: when it last reached the database and renewed it
    (a heartbeat or a progress report), by its own monotonic clock. Once that is more than
    ``seconds`` ago the lease is in doubt: cut off from the database while other workers' reapers
    reach it, the job may have been re-queued and claimed by another worker."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._at = time.monotonic()

    def renewed(self) -> None:
        self._at = time.monotonic()

    def in_doubt(self) -> bool:
        return time.monotonic() - self._at > self.seconds


class ProgressReporter:
    """The fit callback: writes progress + heartbeat and reads the cancel flag in one statement,
    throttled to one round-trip per ``interval`` seconds. ``alive`` (if given) is called on
    every check: the worker's liveness stamp follows the main thread's progress. With a
    ``lease``, a job whose lease is in doubt holds still at its next check (no computation, no
    side effect) until the database answers whether the job is still this worker's: it then
    goes on, or stops (``JobLostError``) without finishing beside the worker that took it."""

    def __init__(
        self,
        engine: Engine,
        job_id: int,
        worker_id: str,
        interval: float,
        stop: threading.Event,
        alive: Callable[[], None] | None = None,
        lease: Lease | None = None,
    ) -> None:
        self.engine = engine
        self.job_id = job_id
        self.worker_id = worker_id
        self.interval = interval
        self.stop = stop
        self.alive = alive
        self.lease = lease
        self._last = float("-inf")

    def __call__(self, info: dict[str, Any]) -> None:
        if self.due():
            self.report(*describe_iteration(info))

    def tick(self, progress: float, message: str) -> None:
        """Throttled progress write + cancel check for non-iterative work (grid cells)."""
        if self.due():
            self.report(running_progress(progress), message)

    def due(self) -> bool:
        """Whether a throttled write is due (``interval`` passed since the last one; it then
        counts as made). Raises ``WorkerStoppingError`` when the worker is stopping. Callers
        build their message only when it is due: most iterations write nothing."""
        if self.stop.is_set():
            raise WorkerStoppingError()
        if self.lease is not None and self.lease.in_doubt():
            self._hold_until_confirmed()
        now = time.monotonic()
        if now - self._last < self.interval:
            return False
        self._last = now
        if self.alive is not None:
            self.alive()
        return True

    def _hold_until_confirmed(self) -> None:
        """Wait, polling the database, until it says whether the job is still ours: renewed
        (the whole cluster was away, and the reapers give the lease back), or ``JobLostError``
        (a reaper took it). ``WorkerStoppingError`` if the worker stops meanwhile."""
        log.warning("job %s: lease not renewed for %g s; holding until the database answers",
                    self.job_id, self.lease.seconds if self.lease else 0)
        while True:
            try:
                row = self._renew({})
            except SQLAlchemyError as exc:
                if not is_transient(exc):
                    raise
                if self.stop.wait(min(self.interval, 0.5) or 0.05):
                    raise WorkerStoppingError() from None
                continue
            if row is None:
                raise JobLostError()
            if row[0]:
                raise JobCancelledError()
            log.info("job %s: lease confirmed, going on", self.job_id)
            return

    def _renew(self, values: dict[str, Any]) -> Any:
        """Stamp the heartbeat (and ``values``) if the job is still ours; its cancel flag, or
        None when it is not ours."""
        with self.engine.begin() as conn:
            row = conn.execute(
                update(Job)
                .where(*owned(self.job_id, self.worker_id))
                .values(**values, heartbeat_at=utcnow())
                .returning(Job.cancel_requested)
            ).first()
        if row is not None and self.lease is not None:
            self.lease.renewed()
        return row

    def report(self, progress: float, message: str) -> None:
        """Write progress + heartbeat and read the cancel flag now, unthrottled. While the
        database is away the fit goes on without this report (one log line) for as long as
        the lease lasts: the heartbeat thread keeps trying to renew it, and a report after the
        database came back tells whether the job is still ours."""
        try:
            row = self._renew({"progress": progress, "message": message})
        except SQLAlchemyError as exc:
            if not is_transient(exc):
                raise
            log.warning(
                "job %s: progress not recorded, database unavailable (%s)",
                self.job_id,
                type(exc).__name__,
            )
            return
        if row is None:
            raise JobLostError()
        if row[0]:
            raise JobCancelledError()


@dataclass
class JobContext:
    engine: Engine
    sessions: sessionmaker[Session]
    job_id: int
    worker_id: str
    params: dict[str, Any]
    dataset_id: int | None
    reporter: ProgressReporter
    settings: Settings


@dataclass
class JobResult:
    """What a runner hands back: ``write`` adds the job's products to a session (not committed)
    and returns the job columns to set with ``succeeded`` (e.g. ``model_id``, ``result``)."""

    write: Callable[[Session], dict[str, Any]]
    message: str = "done"


Runner = Callable[[JobContext], JobResult]


#: The longest ``message`` of a failed job (its ``error`` holds the whole text).
FAILURE_MESSAGE_CHARS = 200


def failure_message(error: str) -> str:
    """A failed job's ``message``: "failed: " and the cause's first line, cut to
    ``FAILURE_MESSAGE_CHARS`` characters (ending in "…" when cut)."""
    first = next((line.strip() for line in error.splitlines() if line.strip()), "")
    text = f"failed: {first}" if first else "failed"
    if len(text) > FAILURE_MESSAGE_CHARS:
        text = text[: FAILURE_MESSAGE_CHARS - 1] + "…"
    return text
