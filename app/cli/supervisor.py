"""The embedded workers of ``msvmav serve``: started beside the API, watched, restarted.

A thread of the API process looks at each worker process every ``CHECK_INTERVAL`` seconds.
When one has died (SIGKILL, out of memory, a crash), its running job is taken from it at once
(``app.jobs.queue.release_dead_worker``: re-queued, the attempt ``lost``; nobody else would
reap it while the only worker is the dead one) and a new worker is started: at once the first
time, then after RESTART_FIRST seconds doubling to RESTART_MAX while replacements die within
STABLE_SECONDS of their start (a crash loop does not spin). ``health`` is ``/readyz``'s view:
not ready while a worker is dead or its replacement has not yet polled the queue (its alive
file, ``app.jobs.worker.alive_path``, not touched since it started).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from multiprocessing.context import SpawnContext, SpawnProcess

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.core.config import Settings
from app.core.db import make_engine
from app.jobs.queue import release_dead_worker
from app.jobs.worker import alive_path, new_worker_id, run_worker

log = logging.getLogger("app.cli.supervisor")

CHECK_INTERVAL = 0.2
RESTART_FIRST, RESTART_MAX = 1.0, 30.0
STABLE_SECONDS = 60.0
STOP_SECONDS = 30.0  # a worker asked to stop (SIGTERM) has this long before SIGKILL


@dataclass
class _Slot:
    """One embedded worker: its current process and what became of the previous ones."""

    name: str
    process: SpawnProcess | None = None
    token: str = ""
    started_at: float = 0.0  # time.time() of the current process's start
    died: str | None = None  # how the last process ended, while no replacement polls
    restart_at: float | None = None  # monotonic time of the next start, while dead
    quick_deaths: int = 0
    restarts: int = 0

    @property
    def worker_id(self) -> str:
        pid = self.process.pid if self.process is not None else None
        return new_worker_id(self.token, pid)


def exit_text(exitcode: int | None) -> str:
    """How a process ended, for a person: "was killed by SIGKILL", "exited with status 1"."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


class WorkerSupervisor:
    """``count`` worker processes (``ctx``: multiprocessing's spawn context) kept running."""

    def __init__(self, settings: Settings, count: int, ctx: SpawnContext) -> None:
        self.settings = settings
        self.ctx = ctx
        self.slots = [_Slot(f"msvmav-worker-{i}") for i in range(count)]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="msvmav-supervisor", daemon=True)
        self._engine: Engine | None = None

    def start(self) -> None:
        for slot in self.slots:
            self._spawn(slot)
        if self.slots:
            self._thread.start()

    def _spawn(self, slot: _Slot) -> None:
        slot.token = uuid.uuid4().hex[:6]
        slot.process = self.ctx.Process(
            target=run_worker,  # pickled by name: the spawned process imports app.jobs.worker
            args=(self.settings.model_dump(), os.getpid(), slot.token),
            name=slot.name,
            daemon=False,
        )
        slot.started_at = time.time()
        slot.restart_at = None
        slot.process.start()

    def _watch(self) -> None:
        while not self._stop.wait(CHECK_INTERVAL):
            with self._lock:  # (health reads the slots)
                if self._stop.is_set():
                    return
                dead = [self._look_after(slot) for slot in self.slots]
            for worker_id, how in filter(None, dead):  # outside the lock: /readyz never waits
                self._release(worker_id, how)

    def _look_after(self, slot: _Slot) -> tuple[str, str] | None:
        """Restart ``slot``'s worker when it is dead and its time has come; the dead worker's
        id and how it ended when it has just been found dead."""
        process, dead = slot.process, None
        if process is not None and not process.is_alive():
            dead = slot.worker_id, exit_text(process.exitcode)
            self._buried(slot, *dead)
        if slot.restart_at is not None and time.monotonic() >= slot.restart_at:
            slot.restarts += 1
            self._spawn(slot)
            log.warning("embedded worker %s restarted (pid %s)", slot.name, slot.process.pid)
        return dead

    def _buried(self, slot: _Slot, worker_id: str, how: str) -> None:
        """``slot``'s process (``worker_id``) has died (``how``): schedule a new one."""
        lived = time.time() - slot.started_at
        slot.quick_deaths = slot.quick_deaths + 1 if lived < STABLE_SECONDS else 1
        delay = 0.0 if slot.quick_deaths <= 1 else RESTART_FIRST * 2 ** (slot.quick_deaths - 2)
        slot.process, slot.died = None, f"{how} after {lived:.0f} s"
        slot.restart_at = time.monotonic() + min(delay, RESTART_MAX)
        log.error(
            "embedded worker %s (%s) %s; restarting it in %g s",
            slot.name,
            worker_id,
            how,
            min(delay, RESTART_MAX),
        )

    def _release(self, worker_id: str, how: str) -> None:
        """The dead worker's job back in the queue at once (its attempt ``lost``)."""
        try:
            if self._engine is None:
                self._engine = make_engine(self.settings.database_url)
            release_dead_worker(
                self._engine, worker_id, f"process {how}", self.settings.max_attempts
            )
        except SQLAlchemyError as exc:  # its lease expires instead: any worker reaps it then
            log.warning(
                "job of %s not released: database unavailable (%s)", worker_id, type(exc).__name__
            )

    def health(self) -> tuple[bool, str]:
        """Whether every embedded worker runs, and a line saying so (or what is wrong)."""
        with self._lock:
            problems = [p for p in map(self._problem, self.slots) if p]
        if problems:
            return False, "; ".join(problems)
        n = len(self.slots)
        return True, f"{n} of {n} embedded workers running"

    def _problem(self, slot: _Slot) -> str | None:
        if slot.process is None:
            return f"embedded worker {slot.name} {slot.died}; not restarted yet"
        if slot.died is None:
            return None
        try:
            polled = os.stat(alive_path(self.settings, slot.process.pid)).st_mtime
        except OSError:
            polled = 0.0
        if polled >= slot.started_at:  # (a shared MSVMAV_WORKER_ALIVE_FILE: touched since)
            slot.died = None
            return None
        return f"embedded worker {slot.name} {slot.died}; its replacement is not polling yet"

    def metric_lines(self) -> list[str]:
        """Prometheus lines: restarts of the embedded workers since the API started."""
        return [
            "# HELP msvmav_worker_restarts_total Embedded workers restarted after they died",
            "# TYPE msvmav_worker_restarts_total counter",
            f"msvmav_worker_restarts_total {sum(slot.restarts for slot in self.slots)}",
        ]

    def stop(self) -> None:
        """Stop watching, then SIGTERM every worker (it re-queues its job and exits); SIGKILL
        one that has not exited within STOP_SECONDS."""
        with self._lock:
            self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        processes = [slot.process for slot in self.slots if slot.process is not None]
        for p in processes:
            if p.is_alive():
                p.terminate()
        for p in processes:
            p.join(timeout=STOP_SECONDS)
            if p.is_alive():
                p.kill()
                p.join()
        if self._engine is not None:
            self._engine.dispose()
