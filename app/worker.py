"""The job worker: claim a queued job atomically, run it, record the outcome.

Several workers (processes, possibly on several machines sharing one PostgreSQL) may run at
once. Guarantees:

* **claim once** — ``claim_next_job`` moves one job from ``queued`` to ``running`` atomically
  (PostgreSQL: ``SELECT … FOR UPDATE SKIP LOCKED`` then ``UPDATE``; SQLite: one conditional
  ``UPDATE … WHERE id = (SELECT …) AND status = 'queued' RETURNING id`` inside a
  ``BEGIN IMMEDIATE`` transaction) and counts the claim in ``attempts``;
* **all or nothing** — the model rows and the job's ``succeeded`` are written in one
  transaction, and only if this worker still owns the running job;
* **cancel** — the fit callback re-reads the job's cancel flag (at most every
  ``cancel_check_interval`` seconds, together with the progress update) and raises to abort;
* **no job stuck in running** — a heartbeat thread stamps ``heartbeat_at``; any worker fails a
  running job whose heartbeat is older than ``stale_job_after`` (cancelled if a cancel was
  requested). Failing rather than re-queueing is deliberate: a job that killed its worker
  (out of memory, say) would otherwise kill the next one too;
* **SIGTERM/SIGINT** — stop claiming, abort the running fit at its next iteration and put that
  job back in the queue (it did nothing wrong), then exit.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, case, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import make_engine, make_session_factory
from app.orm import Job, utcnow
from solver.parallel import dask_cluster

log = logging.getLogger("app.worker")


class JobCancelledError(Exception):
    """The job's cancel flag was set."""


class JobLostError(Exception):
    """The job is no longer ours (reaped as stale, or otherwise finished)."""


class WorkerStoppingError(Exception):
    """The worker was asked to shut down."""


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


# --- claiming and reaping ----------------------------------------------------------------------


def claim_next_job(engine: Engine, worker_id: str) -> int | None:
    """Atomically take the oldest queued job; its id, or None when the queue is empty."""
    now = utcnow()
    claimed = {
        "status": "running",
        "worker_id": worker_id,
        "attempts": Job.attempts + 1,
        "started_at": now,
        "heartbeat_at": now,
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
            conn.execute(update(Job).where(Job.id == job_id).values(**claimed))
            return job_id
        oldest = (
            select(Job.id).where(Job.status == "queued").order_by(Job.id).limit(1).scalar_subquery()
        )
        return conn.scalar(
            update(Job)
            .where(Job.id == oldest, Job.status == "queued")
            .values(**claimed)
            .returning(Job.id)
        )


def reap_stale_jobs(engine: Engine, stale_after: float) -> int:
    """End running jobs whose worker stopped heartbeating; the number ended."""
    now = utcnow()
    cutoff = now - timedelta(seconds=stale_after)
    with engine.begin() as conn:
        result = conn.execute(
            update(Job)
            .where(Job.status == "running", Job.heartbeat_at < cutoff)
            .values(
                status=case((Job.cancel_requested, "cancelled"), else_="failed"),
                error=case(
                    (Job.cancel_requested, None),
                    else_=f"worker lost: no heartbeat for more than {stale_after:g} s",
                ),
                finished_at=now,
            )
        )
    if result.rowcount:
        log.warning("reaped %d stale running job(s)", result.rowcount)
    return result.rowcount


# --- progress, cancel, heartbeat --------------------------------------------------------------


def _owned(job_id: int, worker_id: str) -> list[Any]:
    """WHERE clauses: the job is running and still this worker's."""
    return [Job.id == job_id, Job.worker_id == worker_id, Job.status == "running"]


class ProgressReporter:
    """The fit callback: writes progress + heartbeat and reads the cancel flag in one statement,
    throttled to one round-trip per ``interval`` seconds."""

    def __init__(
        self,
        engine: Engine,
        job_id: int,
        worker_id: str,
        interval: float,
        stop: threading.Event,
    ) -> None:
        self.engine = engine
        self.job_id = job_id
        self.worker_id = worker_id
        self.interval = interval
        self.stop = stop
        self._last = float("-inf")

    def __call__(self, info: dict[str, Any]) -> None:
        if self.due():
            self.report(*describe_iteration(info))

    def tick(self, progress: float, message: str) -> None:
        """Throttled progress write + cancel check for non-iterative work (grid cells)."""
        if self.due():
            self.report(_running_progress(progress), message)

    def due(self) -> bool:
        """Whether a throttled write is due (``interval`` passed since the last one; it then
        counts as made). Raises ``WorkerStoppingError`` when the worker is stopping. Callers
        build their message only when it is due: most iterations write nothing."""
        if self.stop.is_set():
            raise WorkerStoppingError()
        now = time.monotonic()
        if now - self._last < self.interval:
            return False
        self._last = now
        return True

    def report(self, progress: float, message: str) -> None:
        """Write progress + heartbeat and read the cancel flag now, unthrottled."""
        with self.engine.begin() as conn:
            row = conn.execute(
                update(Job)
                .where(*_owned(self.job_id, self.worker_id))
                .values(progress=progress, message=message, heartbeat_at=utcnow())
                .returning(Job.cancel_requested)
            ).first()
        if row is None:
            raise JobLostError()
        if row[0]:
            raise JobCancelledError()


def _running_progress(fraction: float) -> float:
    """``fraction`` clamped to [0, 0.99]: only a finished job shows 1."""
    return min(max(fraction, 0.0), 0.99)


def describe_iteration(info: dict[str, Any]) -> tuple[float, str]:
    """Progress in [0, 0.99] and a message from a solver callback ``info`` dict."""
    k = int(info.get("iteration", 0))
    t = max(int(info.get("max_iter", 1) or 1), 1)
    task = int(info.get("task", 0))
    n_tasks = max(int(info.get("n_tasks", 1) or 1), 1)
    progress = _running_progress((task + min(k, t) / t) / n_tasks)
    head = f"task {task + 1}/{n_tasks}, iteration {k}/{t}"
    values = [
        f"{name}={info[key]:.6g}"
        for key, name in (("theta", "θ̂"), ("objective", "SV/θ̂²"))
        if isinstance(info.get(key), int | float)
    ]
    return progress, f"{head}: {', '.join(values)}" if values else head


class Heartbeat:
    """Background thread stamping ``heartbeat_at`` while a job runs (a single long iteration,
    or data loading, must not make the job look dead)."""

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
        while not self._done.wait(self.interval):
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        update(Job)
                        .where(*_owned(self.job_id, self.worker_id))
                        .values(heartbeat_at=utcnow())
                    )
            except Exception:  # a missed beat is not fatal; the next one may succeed
                log.exception("heartbeat of job %s failed", self.job_id)


# --- running a job ------------------------------------------------------------------------------


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


def run_train_job(ctx: JobContext) -> JobResult:
    from app.datasets import service as datasets
    from app.models import service as models
    from app.training import DEFAULT_ALGORITHM, train
    from solver.model_selection import n_cells

    with ctx.sessions() as session:
        dataset = datasets.get(session, ctx.dataset_id) if ctx.dataset_id is not None else None
        if dataset is None:
            raise ValueError(f"dataset {ctx.dataset_id} no longer exists")
        X, y = datasets.load_arrays(session, dataset)
    algorithm = ctx.params.get("algorithm") or DEFAULT_ALGORITHM
    search = ctx.params.get("search")
    callback: Callable[[dict[str, Any]], Any] = ctx.reporter
    search_callback = None
    if search:
        # grid_values is the grid resolved to a dict at submission
        cells = n_cells(
            algorithm,
            dataset.n_features,
            grid=search.get("grid_values") or {},
            cv=int(search.get("cv", 5)),
        )
        total = cells + 1  # the refit on the whole training part counts as one more
        refit_progress = _running_progress(cells / total)

        def search_callback(done: int, n: int) -> None:
            ctx.reporter.tick(done / total, f"CV cell {done}/{n}")

        def refit_callback(info: dict[str, Any]) -> None:
            if ctx.reporter.due():
                _, detail = describe_iteration(info)
                ctx.reporter.report(refit_progress, f"refit with the best parameters: {detail}")

        callback = refit_callback

        ctx.reporter.report(
            0.0, f"cross-validating {algorithm}: {cells} cells on {dataset.n_rows} rows"
        )
    else:
        ctx.reporter.report(
            0.0,
            f"fitting {algorithm} on {dataset.n_rows} rows × {dataset.n_features} features",
        )
    # a search's cells run on the Dask cluster when one is configured
    with dask_cluster(ctx.settings.dask_scheduler if search else None):
        outcome = train(
            X,
            y,
            ctx.params,
            callback=callback,
            search_callback=search_callback,
            n_jobs=ctx.settings.search_jobs,
        )

    def write(session: Session) -> dict[str, Any]:
        model = models.save(
            session, outcome=outcome, dataset=dataset, job_id=ctx.job_id, params=ctx.params
        )
        return {
            "model_id": model.id,
            "result": {
                "model_id": model.id,
                "holdout_accuracy": outcome.holdout_accuracy,
                "fit_seconds": outcome.fit_seconds,
                "n_iter": outcome.n_iter,
                "algorithm": outcome.algorithm,
                "best_params": outcome.search["best_params"] if outcome.search else None,
                "best_score": outcome.search["best_score"] if outcome.search else None,
            },
        }

    notes = [f"{outcome.algorithm} fitted in {outcome.fit_seconds:.2f} s"]
    if outcome.n_iter:
        notes.append(f"{outcome.n_iter} iterations")
    if outcome.holdout_accuracy is not None:
        notes.append(f"hold-out accuracy {outcome.holdout_accuracy:.4f}")
    return JobResult(write=write, message=", ".join(notes))


def run_experiment_job(ctx: JobContext) -> JobResult:
    from app.experiments.service import run

    with dask_cluster(ctx.settings.dask_scheduler):  # its cells on the Dask cluster, if set
        return run(ctx)


RUNNERS: dict[str, Callable[[JobContext], JobResult]] = {
    "train": run_train_job,
    "experiment": run_experiment_job,
}


def run_job(
    engine: Engine,
    job_id: int,
    worker_id: str,
    settings: Settings,
    stop: threading.Event | None = None,
) -> str:
    """Run a job this worker has claimed; returns its final status (``queued`` when put back
    because the worker is stopping)."""
    stop = stop or threading.Event()
    sessions = make_session_factory(engine)
    with sessions() as session:
        job = session.get(Job, job_id)
        kind, params, dataset_id = job.kind, dict(job.params), job.dataset_id
    reporter = ProgressReporter(engine, job_id, worker_id, settings.cancel_check_interval, stop)
    ctx = JobContext(engine, sessions, job_id, worker_id, params, dataset_id, reporter, settings)
    log.info("job %s (%s) started", job_id, kind)
    with Heartbeat(engine, job_id, worker_id, settings.heartbeat_interval):
        try:
            runner = RUNNERS.get(kind)
            if runner is None:
                raise ValueError(f"no runner for job kind {kind!r}")
            result = runner(ctx)
            return _succeed(engine, sessions, job_id, worker_id, result)
        except JobCancelledError:
            return _finish(
                engine, job_id, worker_id, "cancelled", message="cancelled while running"
            )
        except WorkerStoppingError:
            return _requeue(engine, job_id, worker_id)
        except JobLostError:
            log.warning("job %s was taken from this worker; result discarded", job_id)
            return "lost"
        except Exception as exc:
            log.exception("job %s failed", job_id)
            return _finish(
                engine, job_id, worker_id, "failed", error=_error_text(exc), message="failed"
            )


def _error_text(exc: BaseException) -> str:
    """The job's error text: the message of a data/parameter error as is, other exceptions
    with their type; the traceback goes to the worker's log only."""
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
            .where(*_owned(job_id, worker_id), Job.cancel_requested.is_(False))
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
            .where(*_owned(job_id, worker_id))
            .values(status=status, message=message, error=error, finished_at=utcnow())
        ).rowcount
    if not done:
        log.warning("job %s was no longer ours when it ended %s", job_id, status)
        return "lost"
    log.info("job %s %s", job_id, status)
    return status


def _requeue(engine: Engine, job_id: int, worker_id: str) -> str:
    with engine.begin() as conn:
        conn.execute(
            update(Job)
            .where(*_owned(job_id, worker_id))
            .values(
                status="queued",
                worker_id=None,
                started_at=None,
                heartbeat_at=None,
                progress=0.0,
                message="re-queued: its worker shut down",
            )
        )
    log.info("job %s put back in the queue", job_id)
    return "queued"


# --- the loop -----------------------------------------------------------------------------------


class Worker:
    def __init__(
        self, settings: Settings, engine: Engine | None = None, parent_pid: int | None = None
    ) -> None:
        self.settings = settings
        self.parent_pid = parent_pid
        self.engine = engine or make_engine(settings.database_url)
        self.worker_id = new_worker_id()
        self.stop_event = threading.Event()
        self._last_reap = float("-inf")

    def run_once(self) -> str | None:
        """Reap stale jobs (at most every heartbeat interval), then claim and run one job.
        The job's final status, or None when nothing was queued."""
        now = time.monotonic()
        if now - self._last_reap >= self.settings.heartbeat_interval:
            self._last_reap = now
            reap_stale_jobs(self.engine, self.settings.stale_job_after)
        job_id = claim_next_job(self.engine, self.worker_id)
        if job_id is None:
            return None
        return run_job(self.engine, job_id, self.worker_id, self.settings, self.stop_event)

    def run_forever(self) -> None:
        log.info("worker %s polling %s", self.worker_id, self.engine.url.render_as_string())
        while not self.stop_event.is_set():
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                log.warning("parent process %s is gone; stopping", self.parent_pid)
                break
            try:
                status = self.run_once()
            except Exception:  # database hiccup: log, back off, keep serving
                log.exception("worker loop error")
                status = None
            if status is None:
                self.stop_event.wait(self.settings.worker_poll_interval)
        log.info("worker %s stopped", self.worker_id)

    def stop(self, *_: object) -> None:
        self.stop_event.set()


def run_worker(
    settings: Settings | dict[str, Any] | None = None, parent_pid: int | None = None
) -> None:
    """Process entry point (``msvmav worker``, and the workers ``msvmav serve`` spawns, which
    pass ``parent_pid`` so that they stop if the API process dies without stopping them)."""
    from app.logs import configure_logging

    if isinstance(settings, dict):
        settings = Settings(**settings)
    settings = settings or Settings()
    configure_logging(settings.log_level)
    worker = Worker(settings, parent_pid=parent_pid)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    try:
        worker.run_forever()
    finally:
        worker.engine.dispose()
