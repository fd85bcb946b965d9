"""A bounded in-memory queue of request rows and the daemon thread that drains it, off the
request path: the prediction log's writer (``app.monitoring.log``) and the shadow scorer
(``app.monitoring.shadow``) are each one.

A request only appends an entry (``_put``: never waits for I/O); when the queue holds its most
rows, the entry is dropped and counted (``dropped``). The thread wakes every flush interval, or
sooner once a batch's worth of rows waits, and drains the queue (``flush``, a subclass's) a
batch at a time (``_take``); a failing step is logged and the thread goes on. ``close`` (the
app's shutdown) stops the thread and drains what is left.

Reads never take the drainer's lock: every queued row has a number (``_accepted`` counts them),
the thread counts the rows it has finished with, in queue order (``_finished``), and a read
waits at most a bounded time for the rows queued before it (``catch_up``), then answers from
what is written with the number of rows still pending.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("app.monitoring")

E = TypeVar("E")


class BatchQueue(Generic[E]):
    """See the module's docstring. Subclasses give ``label`` (thread name and log messages),
    ``_rows_of``, ``_limits`` and ``flush``; ``_on_start`` and ``_tick`` may add to the
    thread's start and to each of its rounds."""

    label = "background"

    def __init__(self) -> None:
        self.dropped = 0  # rows not queued (the queue was full) or whose batch failed
        self._queue: deque[E] = deque()
        self._queued_rows = 0
        self._lock = threading.Lock()  # the queue and its count
        self._write_lock = threading.Lock()  # one drainer at a time (the thread, flush, close)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._accepted = 0  # rows ever queued (under ``_lock``)
        self._done = 0  # of those, rows the thread finished with (written, skipped or dropped)
        self._progress = threading.Condition(threading.Lock())

    # --- what a subclass gives ----------------------------------------------------------------

    def _rows_of(self, entry: E) -> int:
        raise NotImplementedError

    def _limits(self) -> tuple[int, int, float]:
        """(most rows queued, rows per batch, seconds between rounds), read when used."""
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def _on_start(self) -> None:
        """Run first on the thread."""

    def _tick(self) -> None:
        """One round of the thread."""
        self._guarded(self.flush)

    # --- the request path ---------------------------------------------------------------------

    def _put(self, entry: E, admit: Callable[[E], E] | None = None) -> bool:
        """Queue ``entry`` (``admit(entry)`` instead, called under the queue's lock), starting
        the thread if it has not started; False when it was dropped."""
        n = self._rows_of(entry)
        most, batch_rows, _ = self._limits()
        with self._lock:
            if self._queued_rows + n > most or self._stop.is_set():
                self.dropped += n
                return False
            self._queue.append(entry if admit is None else admit(entry))
            self._queued_rows += n
            self._accepted += n
            if self._thread is None:
                self._start()
            if self._queued_rows >= batch_rows:
                self._wake.set()
        return True

    def pending(self) -> int:
        """Rows queued and not yet finished with (written, skipped or dropped)."""
        return self._accepted - self._done

    # --- the reads ----------------------------------------------------------------------------

    def _finished(self, n: int) -> None:
        """``n`` more rows, the oldest not yet counted, are done with: wake the waiting reads."""
        with self._progress:
            self._done += n
            self._progress.notify_all()

    def catch_up(self, timeout: float) -> int:
        """Wait at most ``timeout`` seconds for the rows queued before this call to be done
        with (never taking the drainer's lock); the rows still pending then."""
        with self._lock:
            mark = self._accepted
        if self._done < mark:
            self._wake.set()
            deadline = time.monotonic() + timeout
            with self._progress:
                while self._done < mark:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._progress.wait(left):
                        break
        return self.pending()

    # --- the thread ---------------------------------------------------------------------------

    def _start(self) -> None:
        name = "msvmav-" + self.label.replace(" ", "-")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._on_start()
        while not self._stop.is_set():
            self._wake.wait(self._limits()[2])
            self._wake.clear()
            self._tick()

    def _guarded(self, step: Any) -> None:
        try:
            step()
        except Exception:  # the thread must never stop: say so, go on
            log.exception("%s: %s failed", self.label, getattr(step, "__name__", step))

    def _take(self) -> list[E]:
        """The oldest entries, at most a batch's rows (at least one entry)."""
        batch_rows = self._limits()[1]
        batch: list[E] = []
        rows = 0
        with self._lock:
            while self._queue and (
                not batch or rows + self._rows_of(self._queue[0]) <= batch_rows
            ):
                entry = self._queue.popleft()
                batch.append(entry)
                rows += self._rows_of(entry)
            self._queued_rows -= rows
        return batch

    def _discard(self, drop: Callable[[E], bool]) -> None:
        """Remove the queued entries ``drop`` names."""
        with self._lock:
            kept = deque(e for e in self._queue if not drop(e))
            removed = self._queued_rows
            self._queued_rows = sum(self._rows_of(e) for e in kept)
            removed -= self._queued_rows
            self._queue = kept
        self._finished(removed)

    def close(self) -> None:
        """Stop the thread and drain what is queued (the app's shutdown)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=30.0)
        self.flush()
