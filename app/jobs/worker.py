"""The job worker: claim a queued job under a lease, run it through the runner registry, record
the outcome.

Several workers (processes, possibly on several machines sharing one PostgreSQL) may run at
once. Guarantees:

* **claim once** — ``claim_next_job`` (``app.jobs.queue``) moves one job from ``queued`` to
  ``running`` atomically, counts the claim in ``attempts`` and opens a ``job_attempts`` row;
* **all or nothing, exactly once** — the model rows and the job's ``succeeded`` are written in
  one transaction, and only if this worker still holds the job's lease: one model per job;
* **cancel** — the fit callback re-reads the job's cancel flag (at most every
  ``cancel_check_interval`` seconds, together with the progress update) and raises to abort;
* **no job lost** — a heartbeat thread renews the lease every ``heartbeat_interval`` seconds;
  any worker re-queues a running job whose heartbeat is older than ``lease_seconds`` (its
  worker was killed or frozen), and fails it instead once it has lost ``max_attempts`` workers
  (a job that kills its worker, out of memory say, would otherwise kill them all). A frozen
  worker that resumes finds the job no longer its own and discards its result;
* **SIGTERM/SIGINT** — stop claiming, abort the running fit at its next iteration and put that
  job back in the queue (it did nothing wrong; this does not count as a lost worker), then exit;
* **visible when hung** — the main loop (after each successful poll of the database) and the
  fit callbacks touch the worker's own alive file (``alive_path``); ``msvmav worker --check``
  fails when it is older than ``worker_alive_max_age`` (the loop stopped, hangs, or cannot
  reach the database) or the database's schema is behind the code's;
* **database outages are not deaths** — while the database is away the worker retries with
  backoff, for as long as it is away, and keeps its lease (``with_retries``); a reaper takes
  no lease for ``lease_seconds`` after the server started (``reap_expired_jobs``) or after it
  could not reach the database itself, so only a lease that truly expired is a lost attempt.
  It refuses to start on a schema older than the code's migrations.

Which code runs a job of a given ``kind`` is ``app.jobs.registry``'s business: this module
imports no domain module.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.db import (
    is_transient,
    make_engine,
    schema_behind,
    schema_refusal,
    with_retries,
    worker_limits,
)
from app.core.orm import utcnow
from app.core.runtime import Runtime
from app.jobs.orm import Job
from app.jobs.queue import Heartbeat, claim_next_job, end_attempt, reap_expired_jobs
from app.jobs.registry import get_runner
from app.jobs.runtime import (
    JobCancelledError,
    JobContext,
    JobLostError,
    JobResult,
    Lease,
    ProgressReporter,
    WorkerStoppingError,
    failure_message,
    owned,
)
from app.jobs.wakeup import Wakeup, announce

log = logging.getLogger("app.jobs.worker")

__all__ = ["ProgressReporter", "Worker", "claim_next_job", "run_job", "run_worker"]


def new_worker_id(token: str | None = None, pid: int | None = None) -> str:
    """``host:pid:token``: this process's (or ``pid``'s, on this host) worker id; ``token`` a
    random one by default (``msvmav serve`` gives its embedded workers theirs, so that it knows
    the id of a worker it started)."""
    return f"{socket.gethostname()}:{pid or os.getpid()}:{token or uuid.uuid4().hex[:6]}"


# --- liveness -----------------------------------------------------------------------------------


# The default alive file: each worker process stamps its own, this path suffixed with its pid,
# so that two workers on one host never pass for each other (see alive_path).
DEFAULT_ALIVE_FILE = "/tmp/msvmav-worker-alive"


def alive_path(settings: Settings, pid: int | None = None) -> str:
    """The alive file of the worker process ``pid`` (this one by default): MSVMAV_WORKER_ALIVE_FILE
    as given when it was set to another path (one per worker, the operator's choice), else
    ``/tmp/msvmav-worker-alive.<pid>``."""
    if settings.worker_alive_file != DEFAULT_ALIVE_FILE:
        return settings.worker_alive_file
    return f"{DEFAULT_ALIVE_FILE}.{pid or os.getpid()}"


class AliveStamp:
    """Touches ``path`` (at most once per second): proof that the worker's main thread moves."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None
        self._last = float("-inf")

    def __call__(self) -> None:
        now = time.monotonic()
        if self.path is None or now - self._last < 1.0:
            return
        self._last = now
        try:
            self.path.touch()
        except OSError as exc:  # a read-only /tmp must not stop the work
            log.warning("cannot touch %s: %s", self.path, exc)
            self.path = None

    def remove(self) -> None:
        """At a clean exit: a stopped worker leaves no file behind for ``--check`` to find."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def check_alive(path: str, max_age: float) -> tuple[bool, str]:
    """Whether the worker that stamps ``path`` moved within ``max_age`` seconds, and why."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return False, f"{path} does not exist: no worker loop has run here"
    if age > max_age:
        return False, f"worker loop stalled: {path} last touched {age:.0f} s ago (> {max_age:g})"
    return True, f"worker alive: {path} touched {age:.1f} s ago"


def alive_files(settings: Settings) -> list[str]:
    """The alive files ``--check`` reads: the configured one, or with the default, those of the
    worker processes running on this host (``/tmp/msvmav-worker-alive.<pid>`` of a live pid)."""
    if settings.worker_alive_file != DEFAULT_ALIVE_FILE:
        return [settings.worker_alive_file]
    found = []
    for path in sorted(Path(DEFAULT_ALIVE_FILE).parent.glob(Path(DEFAULT_ALIVE_FILE).name + ".*")):
        pid = path.suffix[1:]
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            found.append(str(path))
    return found


def check_command(settings: Settings, max_age: float | None = None) -> int:
    """``msvmav worker --check``: exit status 0 when every worker on this host moved recently
    (each its own alive file) and the database's schema is at this code's head; 1 otherwise,
    with one line saying why."""
    max_age = max_age or settings.worker_alive_max_age
    files = alive_files(settings)
    results = [check_alive(path, max_age) for path in files] or [
        (False, f"no {DEFAULT_ALIVE_FILE}.<pid> of a running process: no worker runs here")
    ]
    failed = [message for ok, message in results if not ok]
    if not failed:
        failed = _schema_check(settings)
    for message in failed or [message for _, message in results]:
        print(message, file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0


def _schema_check(settings: Settings) -> list[str]:
    engine = make_engine(settings.database_url)
    try:
        behind = schema_behind(engine)
    except SQLAlchemyError as exc:
        return [f"database unreachable: {type(exc).__name__}"]
    finally:
        engine.dispose()
    return [behind] if behind else []


# --- running a job ------------------------------------------------------------------------------


def run_job(
    runtime: Runtime,
    job_id: int,
    worker_id: str,
    settings: Settings,
    stop: threading.Event | None = None,
    alive: AliveStamp | None = None,
) -> str:
    """Run a job this worker has claimed; returns its final status (``queued`` when put back
    because the worker is stopping or lost the database, ``lost`` when its lease was taken
    meanwhile).

    While the database is away, the job's read and every write of its outcome are tried again
    (see ``with_retries``) until it is back or the worker stops, however long that takes, the
    heartbeat thread renewing the lease as soon as it is back: an outage is not a lost worker
    (the reapers give a lease lost to an outage back, ``reap_expired_jobs``; a write that
    finds the job no longer this worker's writes nothing). A runner stopped by the database
    being away puts its job back in the queue (not a lost attempt)."""
    stop = stop or threading.Event()
    engine, sessions = runtime.engine, runtime.sessions
    patience = math.inf

    def read() -> tuple[str, dict[str, Any], int | None]:
        with sessions() as session:
            job = session.get(Job, job_id)
            return job.kind, dict(job.params), job.dataset_id

    kind, params, dataset_id = with_retries(read, f"job {job_id}", patience, stop)
    lease = Lease(settings.lease_seconds)  # in doubt once not renewed for a lease
    reporter = ProgressReporter(
        engine, job_id, worker_id, settings.cancel_check_interval, stop, alive, lease
    )
    ctx = JobContext(engine, sessions, job_id, worker_id, params, dataset_id, reporter, settings)
    log.info("job %s (%s) started", job_id, kind)

    def outcome(write: Callable[[], str]) -> str:
        return with_retries(write, f"job {job_id}", patience, stop)

    with Heartbeat(engine, job_id, worker_id, settings.heartbeat_interval, lease):
        try:
            result = get_runner(kind)(ctx)
            return outcome(lambda: _succeed(engine, sessions, job_id, worker_id, result))
        except JobCancelledError:
            return outcome(
                lambda: _finish(
                    engine, job_id, worker_id, "cancelled", message="cancelled while running"
                )
            )
        except WorkerStoppingError:
            return outcome(lambda: _requeue(engine, job_id, worker_id))
        except JobLostError:
            log.warning("job %s was taken from this worker; result discarded", job_id)
            return "lost"
        except SQLAlchemyError as exc:
            if not is_transient(exc):
                return _failed(engine, job_id, worker_id, exc)
            log.warning("job %s stopped: database unavailable (%s)", job_id, type(exc).__name__)
            reason = "re-queued: the database was unavailable while it ran"
            return outcome(lambda: _requeue(engine, job_id, worker_id, reason))
        except Exception as exc:
            return _failed(engine, job_id, worker_id, exc)


def _failed(engine: Engine, job_id: int, worker_id: str, exc: Exception) -> str:
    log.exception("job %s failed", job_id)
    error = _error_text(exc)
    return _finish(
        engine, job_id, worker_id, "failed", error=error, message=failure_message(error)
    )


def _error_text(exc: BaseException) -> str:
    """The job's error text: the message of a data/parameter error as is, other exceptions
    with their type; the traceback goes to the worker's log only."""
    if isinstance(exc, SQLAlchemyError):  # its text holds SQL and parameters: log only
        return "a database error stopped the job; the details are in the worker's log"
    text = str(exc) or type(exc).__name__
    if not isinstance(exc, ValueError | TypeError):
        text = f"{type(exc).__name__}: {text}"
    return text[:4000]


def _succeed(
    engine: Engine, sessions: sessionmaker[Session], job_id: int, worker_id: str, result: JobResult
) -> str:
    with sessions() as session:
        columns = result.write(session)
        done = session.execute(
            update(Job)
            .where(*owned(job_id, worker_id), Job.cancel_requested.is_(False))
            .values(
                status="succeeded",
                progress=1.0,
                message=result.message,
                finished_at=utcnow(),
                **columns,
            )
            .execution_options(synchronize_session=False)
        ).rowcount
        if done == 1:
            end_attempt(session.connection(), job_id, worker_id, "succeeded")
            session.commit()
            log.info("job %s succeeded", job_id)
            return "succeeded"
        session.rollback()
    # Cancelled at the last moment, or no longer ours: the products are discarded.
    return _finish(engine, job_id, worker_id, "cancelled", message="cancelled while running")


def _finish(
    engine: Engine,
    job_id: int,
    worker_id: str,
    status: str,
    *,
    message: str,
    error: str | None = None,
) -> str:
    with engine.begin() as conn:
        done = conn.execute(
            update(Job)
            .where(*owned(job_id, worker_id))
            .values(status=status, message=message, error=error, finished_at=utcnow())
        ).rowcount
        if done:
            end_attempt(conn, job_id, worker_id, status)
    if not done:
        log.warning("job %s was no longer ours when it ended %s", job_id, status)
        return "lost"
    log.info("job %s %s", job_id, status)
    return status


def _requeue(
    engine: Engine, job_id: int, worker_id: str, reason: str = "re-queued: its worker shut down"
) -> str:
    with engine.begin() as conn:
        done = conn.execute(
            update(Job)
            .where(*owned(job_id, worker_id))
            .values(
                status="queued",
                worker_id=None,
                started_at=None,
                heartbeat_at=None,
                progress=0.0,
                message=reason,
            )
        ).rowcount
        if done:
            end_attempt(conn, job_id, worker_id, "requeued")
            announce(conn)
    if not done:
        log.warning("job %s was no longer ours when this worker stopped", job_id)
        return "lost"
    log.info("job %s put back in the queue", job_id)
    return "queued"


# --- the loop -----------------------------------------------------------------------------------


class Worker:
    def __init__(
        self,
        settings: Settings,
        engine: Engine | None = None,
        parent_pid: int | None = None,
        token: str | None = None,
    ) -> None:
        self.settings = settings
        self.parent_pid = parent_pid
        # the worker's runtime state (app.core.runtime): its sessions carry it to the runners
        self.runtime = Runtime(
            engine or make_engine(settings.database_url, worker_limits(settings)), settings
        )
        self.engine = self.runtime.engine
        self.worker_id = new_worker_id(token)
        self.stop_event = threading.Event()
        self.alive = AliveStamp(alive_path(settings))
        self.wakeup = Wakeup(self.engine)  # idle: until a job is queued, or the poll
        self._last_reap = float("-inf")
        # No reaping before this (monotonic seconds): a lease after this worker's own outage
        self._reap_after = float("-inf")

    def reap(self) -> int:
        """Re-queue (or fail) jobs whose lease expired; at most once a second (or once per
        heartbeat interval, if shorter). Idle workers reap: a busy one cannot run the job
        anyway. Not for ``lease_seconds`` after this worker could not reach the database
        (``database_lost``): the workers running jobs could not renew their leases either, and
        get a whole lease to do it once it is back."""
        now = time.monotonic()
        if now < self._reap_after:
            return 0
        if now - self._last_reap < min(1.0, self.settings.heartbeat_interval):
            return 0
        self._last_reap = now
        return reap_expired_jobs(
            self.engine, self.settings.lease_seconds, self.settings.max_attempts
        )

    def run_once(self) -> str | None:
        """Reap expired leases, then claim and run one job. The job's final status, or None
        when nothing was queued. The liveness stamp follows a successful database round trip:
        a worker that cannot reach its database goes stale too."""
        self.reap()
        job_id = claim_next_job(self.engine, self.worker_id)
        self.alive()
        if job_id is None:
            return None
        return run_job(
            self.runtime, job_id, self.worker_id, self.settings, self.stop_event, self.alive
        )

    def run_forever(self) -> None:
        log.info("worker %s polling %s", self.worker_id, self.engine.url.render_as_string())
        backoff = self.settings.worker_poll_interval
        while not self.stop_event.is_set():
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                log.warning("parent process %s is gone; stopping", self.parent_pid)
                break
            failed = True  # a failed look waits out its backoff: no wake-up, no log flood
            try:
                status = self.run_once()
                backoff, failed = self.settings.worker_poll_interval, False
            except SQLAlchemyError as exc:
                status = None
                if is_transient(exc):  # away: one line per try, tries further apart (to 5 s)
                    log.warning("worker loop: database unavailable (%s)", type(exc).__name__)
                    self.database_lost()
                    backoff = min(2 * backoff, max(5.0, backoff))
                else:
                    log.exception("worker loop error")
            except Exception:  # log, back off, keep serving
                log.exception("worker loop error")
                status = None
            if status is None and failed:
                self.stop_event.wait(backoff)
            elif status is None:
                self.wakeup.wait(backoff, self.stop_event)
        self.wakeup.close()
        log.info("worker %s stopped", self.worker_id)

    def database_lost(self) -> None:
        """This worker could not reach the database just now: no reaping for a lease."""
        self._reap_after = time.monotonic() + self.settings.lease_seconds

    def stop(self, *_: object) -> None:
        self.stop_event.set()


def run_worker(
    settings: Settings | dict[str, Any] | None = None,
    parent_pid: int | None = None,
    token: str | None = None,
) -> None:
    """Process entry point (``msvmav worker``, and the workers ``msvmav serve`` spawns, which
    pass ``parent_pid`` so that they stop if the API process dies without stopping them, and
    ``token``, the end of their worker id: see ``new_worker_id``)."""
    from app.core.logs import configure_logging

    if isinstance(settings, dict):
        settings = Settings(**settings)
    settings = settings or Settings()
    configure_logging(settings.log_level)
    worker = Worker(settings, parent_pid=parent_pid, token=token)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    try:
        refusal = schema_refusal(worker.engine)
        if refusal is not None:
            log.error("worker refused to start: %s", refusal)
            raise SystemExit(2)
        worker.run_forever()
    finally:
        worker.alive.remove()
        worker.runtime.close()
