"""Where the solver's independent tasks run: in this process, in joblib's worker processes
(its default process backend, loky) or, inside ``dask_cluster(address)``, on a Dask cluster.

``run_tasks(fn, shared, tasks, n_jobs)`` yields ``fn(shared, task, tick)`` for every task in
the order they finish, and ``None`` every ``POLL`` seconds in which none finished, so that the
caller can report progress and abort by closing the generator (or raising between two items).
What an abort stops depends on where the tasks run: in this process, no further task starts;
in joblib's worker processes, the running tasks raise ``TaskStoppedError`` at their next tick
and joblib cancels the rest; on a Dask cluster, ``client.cancel`` drops the queued tasks, but
the ones already running on a worker run to their end (their results are discarded).

``shared`` is the data every task reads; it is sent to each worker once, not per task: joblib
memory-maps its large arrays, Dask scatters it to every worker (replicated, so a worker that
dies loses no data and the scheduler re-runs its tasks elsewhere).

The result of a task never depends on where it runs: callers place results by their task's
indices, so the reduction order is fixed whatever the completion order.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from threadpoolctl import threadpool_limits

#: seconds between two ``None`` items while the tasks of worker processes run
POLL = 0.5
#: seconds to wait for a Dask scheduler before the work fails
CONNECT_TIMEOUT = 10.0

Tick = Callable[[], Any]
TaskFn = Callable[[Any, Any, Tick], Any]

_CLIENT: ContextVar[Any] = ContextVar("msvmav_dask_client", default=None)


class SchedulerUnreachableError(RuntimeError):
    """A Dask scheduler was configured and cannot be reached (the work does not run locally)."""


class TaskStoppedError(Exception):
    """Raised inside a worker's task when the search that submitted it was stopped."""


@contextmanager
def dask_cluster(address: str | None, *, timeout: float | None = None) -> Iterator[Any]:
    """Run the searches and experiments inside this block on the Dask scheduler at
    ``address`` (e.g. "tcp://127.0.0.1:8786"); with no address, a no-op. Yields the
    ``distributed.Client`` (or None). ``timeout``: seconds to connect (CONNECT_TIMEOUT)."""
    if not address:
        yield None
        return
    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - the dask extra is part of the test extras
        raise SchedulerUnreachableError(
            f"Dask scheduler {address} is configured but dask.distributed is not installed "
            "(pip install 'msvmav[dask]')") from None
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerUnreachableError(
            f"Dask scheduler {address} cannot be reached within {timeout:g} s "
            f"({type(exc).__name__}); start it or unset MSVMAV_DASK_SCHEDULER") from None
    token = _CLIENT.set(client)
    try:
        yield client
    finally:
        _CLIENT.reset(token)
        client.close()


def dask_client() -> Any:
    """The ``distributed.Client`` of the enclosing ``dask_cluster`` block, or None."""
    return _CLIENT.get()


def effective_jobs(n_jobs: int | None) -> int:
    """How many tasks run at once: the Dask cluster's threads inside ``dask_cluster``, else
    ``n_jobs`` (None or -1: all cores)."""
    client = dask_client()
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return (os.cpu_count() or 1) if n_jobs in (None, -1) else max(1, int(n_jobs))


def run_tasks(fn: TaskFn, shared: Any, tasks: Sequence[Any], n_jobs: int | None,
              tick: Tick | None = None) -> Iterator[Any]:
    """Yield ``fn(shared, task, tick)`` of each task as it finishes, ``None`` while waiting.

    On a Dask cluster (inside ``dask_cluster``) whatever ``n_jobs``; else in this process
    when ``n_jobs`` is 1 or there is one task (``tick`` is then called inside the tasks), in
    ``n_jobs`` joblib worker processes otherwise (one BLAS thread each). ``fn`` must be a
    module-level function (it is sent to the workers by name)."""
    if dask_client() is not None:
        yield from _run_dask(fn, shared, tasks)
    elif effective_jobs(n_jobs) == 1 or len(tasks) == 1:
        for task in tasks:
            yield fn(shared, task, tick or _no_tick)
    else:
        yield from _run_joblib(fn, shared, tasks, min(effective_jobs(n_jobs), len(tasks)))


def _no_tick() -> None:
    return None


class _StopFlag:
    """A file whose existence tells a worker process's task to stop (checked at its ticks,
    at most every 0.1 s)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.next = 0.0

    def __call__(self) -> None:
        now = time.monotonic()
        if now >= self.next:
            self.next = now + 0.1
            if os.path.exists(self.path):
                raise TaskStoppedError()


def _in_process(fn: TaskFn, shared: Any, task: Any, stop_path: str) -> Any:
    with threadpool_limits(1):
        return fn(shared, task, _StopFlag(stop_path))


def _run_joblib(fn: TaskFn, shared: Any, tasks: Sequence[Any], n_jobs: int) -> Iterator[Any]:
    from joblib import Parallel, delayed

    fd, stop_path = tempfile.mkstemp(prefix="msvmav-stop-")
    os.close(fd)
    os.unlink(stop_path)  # created again to stop the tasks
    results: queue.Queue = queue.Queue()

    def consume() -> None:
        # joblib's generator blocks until a task finishes: it runs here, and the caller's
        # thread polls the queue so that its callback runs (and can abort) every POLL s
        try:
            for out in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
                    delayed(_in_process)(fn, shared, task, stop_path) for task in tasks):
                results.put((True, out))
        except BaseException as exc:  # handed to the caller's thread
            results.put((False, exc))

    worker = threading.Thread(target=consume, name="msvmav-joblib", daemon=True)
    worker.start()
    try:
        for _ in tasks:
            while True:
                try:
                    ok, out = results.get(timeout=POLL)
                    break
                except queue.Empty:
                    yield None
            if not ok:
                raise out
            yield out
    finally:
        if worker.is_alive():
            # the running tasks raise at their next tick; joblib then cancels the rest
            with open(stop_path, "w"):
                pass
        worker.join()
        if os.path.exists(stop_path):
            os.unlink(stop_path)


def _run_dask(fn: TaskFn, shared: Any, tasks: Sequence[Any]) -> Iterator[Any]:
    """``run_tasks`` on the enclosing ``dask_cluster``'s client. When the generator is closed
    (or the caller raises) before all results came, the unfinished futures and the scattered
    ``shared`` are cancelled: the scheduler drops the tasks still queued, but a task already
    running on a worker is not interrupted; it runs to its end and its result is discarded."""
    client = dask_client()
    if not client.nthreads():
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
        except TimeoutError:
            raise SchedulerUnreachableError(
                f"Dask scheduler {client.scheduler.address} has no workers (none joined within "
                f"{CONNECT_TIMEOUT:g} s); start dask workers or unset MSVMAV_DASK_SCHEDULER"
            ) from None
    [data] = client.scatter([shared], broadcast=True, hash=False)
    pending = [client.submit(_on_dask, fn, data, task, pure=False) for task in tasks]
    try:
        waited = time.monotonic()
        while pending:
            finished = [f for f in pending if f.done()]  # the client's view: no round trip
            if not finished:
                if time.monotonic() - waited >= POLL:
                    waited = time.monotonic()
                    yield None
                time.sleep(0.01)
                continue
            pending = [f for f in pending if not f.done()]
            for f in finished:
                yield f.result()
            waited = time.monotonic()
    finally:
        if pending:
            client.cancel(pending)
        client.cancel([data])


def _on_dask(fn: TaskFn, shared: Any, task: Any) -> Any:
    """One task on a Dask worker. Its tick does nothing: nothing reaches a running task to stop
    it, so once started it runs to its end even if cancelled (its result is then discarded).
    Dask's workers already run one BLAS thread per worker thread (the nanny sets
    OMP/MKL/OPENBLAS_NUM_THREADS=1)."""
    return fn(shared, task, _no_tick)


__all__ = ["CONNECT_TIMEOUT", "POLL", "SchedulerUnreachableError", "TaskStoppedError",
           "dask_client", "dask_cluster", "effective_jobs", "run_tasks"]
