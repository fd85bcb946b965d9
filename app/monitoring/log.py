"""The prediction log's writer: every row /predict scores, written off the request path, and
kept until the database has taken it.

A request only appends one tuple to a bounded in-memory queue (``PredictionLogWriter.record``;
``QUEUE_ROWS`` rows at most: beyond, the request's rows are dropped, counted and logged once).
A daemon thread per process and database takes the queue ``BATCH_ROWS`` rows at a time (every
``FLUSH_SECONDS``, sooner when a batch's worth waits), counts them in the metrics, turns them
into ten columns (a *chunk*) and writes the oldest chunk in one transaction: ``COPY`` on
PostgreSQL, multi-row INSERT statements of ``VALUES_ROWS`` rows on SQLite (see there why not
``executemany``). A chunk the database refuses with a fault that may go away (away, busy,
locked, full) stays first in line and is tried again after a backoff (``RETRY_FIRST`` doubling
to ``RETRY_MAX`` seconds); meanwhile the thread keeps taking the queue, so the chunks wait in
memory (``MEMORY_ROWS`` rows), then in the spool file (``app.monitoring.spool``,
``MSVMAV_PREDICTION_LOG_SPOOL_MB``), oldest first; only a chunk the spool cannot hold is dropped
(counted, logged once). A chunk refused for its contents (a row the database cannot store) is
split in halves until the row is found; that row is dropped, counted and logged. The same
happens when the writer falls behind the traffic: while chunks wait, the queue is taken into
chunks a batch's worth at a time, so the API's memory stays bounded whatever the backlog.

Reads (feedback, the reports) never wait for the writer: they wait at most
``READ_WAIT_SECONDS`` for the rows queued before them (``state``) and say how many rows were
still pending. Retention (``MSVMAV_PREDICTION_LOG_DAYS`` and ``_MAX_ROWS``) runs on a thread of
its own every ``RETENTION_SECONDS``, and sooner once a tenth of ``_MAX_ROWS`` rows were written
since its last run, deleting in chunks of ``DELETE_CHUNK`` rows, one transaction each.
``close`` (the app's shutdown) writes what is left for up to ``CLOSE_SECONDS``; what the
database still refuses stays in the spool file, which the next writer of the database adopts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import repeat
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import Depends
from sqlalchemy import Engine

from app.core.config import Settings
from app.core.db import classify_fault, placeholders
from app.core.deps import RuntimeDep
from app.core.runtime import Part, Runtime
from app.monitoring import feature_drift
from app.monitoring.background import BatchQueue
from app.monitoring.metrics import PredictionMetrics, WriterMetrics, process_lines
from app.monitoring.spool import Columns, Spool

log = logging.getLogger("app.monitoring.log")

QUEUE_ROWS = 200_000
MEMORY_ROWS = 100_000
BATCH_ROWS = 5_000
# A round every 0.1 s: the Python work of turning a round's entries into a chunk (~7 µs an
# entry) holds the event loop's thread back for up to the switch interval at a time, so the
# longer the round the longer the requests it overlaps wait. Rounds of 0.5 s (~600 one-row
# entries under wrk -c8) put one-row /predict's p99 at 16-19 ms against the bare route's 10;
# rounds of 0.1 s at 12-15 ms, for ~10 more commits a second (bench/serve.py --matrix).
FLUSH_SECONDS = 0.1
RETRY_FIRST = 0.25
RETRY_MAX = 5.0
READ_WAIT_SECONDS = 0.25
FLUSH_WAIT_SECONDS = 120.0
CLOSE_SECONDS = 10.0
RETENTION_SECONDS = 60.0
DELETE_CHUNK = 5_000

_COLUMN_NAMES = (
    "model_id, registered_model, version, alias, prediction_id, created_at, decision, "
    "decisions, predicted, clipped"
)
_INSERT = f"INSERT INTO prediction_log ({_COLUMN_NAMES}) VALUES "
_COPY = f"COPY prediction_log ({_COLUMN_NAMES}) FROM STDIN"
_VALUES = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_COLUMNS = 10
# Rows per INSERT statement (ten parameters each). One multi-row statement is one call into
# the driver, which lets go of the GIL once; executemany let go of it and took it back for
# every row, and each time the event loop's thread wanted it back for its own system calls
# (a /predict's socket reads and writes), the two threads took turns: one-row /predict lost
# a third of its throughput to those hand-overs while the log was being written.
VALUES_ROWS = 500
# Deleting in chunks: ids of the oldest rows to delete, DELETE_CHUNK at a time.
_DELETE_OLD = (
    "DELETE FROM prediction_log WHERE id IN (SELECT id FROM prediction_log "
    "WHERE created_at < ? ORDER BY id LIMIT ?)"
)
_DELETE_UPTO = (
    "DELETE FROM prediction_log WHERE id IN (SELECT id FROM prediction_log "
    "WHERE id <= ? ORDER BY id LIMIT ?)"
)
_NTH_NEWEST = "SELECT id FROM prediction_log ORDER BY id DESC LIMIT 1 OFFSET ?"
# Two reads of the primary key's ends: when the ids span at most max_rows, the table holds at
# most max_rows rows, and the OFFSET walk (over every row kept, once a minute) is not needed.
_ID_RANGE = "SELECT min(id), max(id) FROM prediction_log"
# Errors of a row's contents (retrying cannot help): the chunk is split to find the row.
_CONTENT_ERRORS = {"DataError", "IntegrityError"}

# (model_id, registered model, version, alias, time, ids, scores, predicted indices, clipped,
# and optionally the scaled features: app.monitoring.feature_drift)
Entry = tuple[Any, ...]


class PredictionLogWriter(BatchQueue[Entry]):
    """The queue, the chunks waiting and the threads writing them for one database (see the
    module's docstring)."""

    label = "prediction log"

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        engine, settings = runtime.engine, runtime.settings
        self.engine = engine
        self.fetch_one = runtime.fetch_one  # reads on the runtime's reader pool: no lock
        self.drift = feature_drift.new_state()  # app.monitoring.feature_drift's counts
        self.days = settings.prediction_log_days
        self.max_rows = settings.prediction_log_max_rows
        self.sqlite = engine.dialect.name == "sqlite"
        self.written = 0
        self.metrics = PredictionMetrics()  # counted as rows leave the queue
        self.writer_metrics = WriterMetrics()
        spool_bytes = settings.prediction_log_spool_mb << 20
        self.spool = Spool(spool_directory(settings, engine), spool_bytes)
        self._memory: deque[Columns] = deque()  # chunks waiting, oldest first, before the spool
        self._memory_rows = 0
        self._statements: dict[int, str] = {}  # INSERT statements by their number of rows
        self._retry_at = 0.0
        self._retry_delay = 0.0
        self._failing_since: float | None = None
        self._drop_logged = False
        self._counts_asked = 0  # feature counts: rounds asked by reads, and done
        self._counts_done = 0
        self._since_retention = 0
        self._retention_wake = threading.Event()
        self._retention_failing = False

    # --- the request path ---------------------------------------------------------------------

    def record(self, entry: Entry) -> bool:
        """Queue a request's rows (never blocks on I/O); False when they were dropped."""
        if self._put(entry, lambda e: feature_drift.admit(self, e)):
            return True
        self._dropped_rows(0, "the in-memory queue is full (QUEUE_ROWS)")
        return False

    def _rows_of(self, entry: Entry) -> int:
        return len(entry[5])

    def _limits(self) -> tuple[int, int, float]:
        return QUEUE_ROWS, BATCH_ROWS, FLUSH_SECONDS

    # --- the reads ----------------------------------------------------------------------------

    def state(self, timeout: float = READ_WAIT_SECONDS, counts: bool = False) -> dict[str, Any]:
        """Wait at most ``timeout`` seconds for the rows queued before this call to be written
        (with ``counts``, and the feature counts taken so far), never for longer: what a read
        then finds is the log "as of" now, short of ``pending_rows`` of this process's rows."""
        deadline = time.monotonic() + timeout
        counts = counts and self._thread is not None  # (no thread yet: nothing counted)
        if counts:
            with self._progress:
                self._counts_asked += 1
                asked = self._counts_asked
            self._wake.set()
        pending = self.catch_up(timeout)
        if counts:
            with self._progress:
                while self._counts_done < asked:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._progress.wait(left):
                        break
        return {"as_of": datetime.now(UTC), "pending_rows": pending}

    def flush(self, timeout: float = FLUSH_WAIT_SECONDS) -> int:
        """Have every row queued before this call written (by the thread; at most ``timeout``
        seconds); the rows still pending."""
        if self._thread is None or not self._thread.is_alive():
            with self._write_lock:
                self._drain(time.monotonic() + timeout)
            return self.pending()
        return self.catch_up(timeout)

    def apply_retention(self, now: datetime | None = None) -> int:
        """Delete rows older than the retention's days, then all but the newest ``max_rows``;
        the number deleted."""
        now = now or datetime.now(UTC)
        cutoff = now - timedelta(days=self.days)
        deleted = self._delete_chunked(_DELETE_OLD, self._when(cutoff))
        edge = self._nth_newest(self.max_rows)
        if edge is not None:
            deleted += self._delete_chunked(_DELETE_UPTO, edge)
        return deleted

    # --- the threads --------------------------------------------------------------------------

    def _start(self) -> None:
        super()._start()
        retention = threading.Thread(
            target=self._retain, name="msvmav-prediction-log-retention", daemon=True
        )
        retention.start()
        self._retention_thread = retention

    def _run(self) -> None:
        self._guarded(self._adopt)
        while not self._stop.is_set():
            if not self._busy():
                self._wake.wait(self._pause())
                self._wake.clear()
            if self._stop.is_set():
                break
            with self._write_lock:
                self._guarded(self._round)

    def _busy(self) -> bool:
        """Is there a chunk to write now (not waiting out a backoff), or a batch queued?"""
        if self._queued_rows >= BATCH_ROWS or self._counts_asked > self._counts_done:
            return True
        return (bool(self._memory) or len(self.spool) > 0) and time.monotonic() >= self._retry_at

    def _pause(self) -> float:
        if self._failing_since is None:
            return FLUSH_SECONDS
        return max(0.01, min(FLUSH_SECONDS, self._retry_at - time.monotonic()))

    def _round(self) -> None:
        """Take the queue into chunks (all of it while the database fails or a read asked for
        the feature counts; else see ``_move``), write the oldest chunk unless waiting out a
        backoff, then the feature counts a read asked for."""
        counts_asked = self._counts_asked > self._counts_done  # (rows queued are counted)
        self._move(everything=self._failing_since is not None or counts_asked)
        if time.monotonic() >= self._retry_at:
            self._write_oldest()
        if self._counts_asked > self._counts_done:
            asked = self._counts_asked
            if self._failing_since is None:
                feature_drift.write(self, force=True)
            else:
                feature_drift.write(self)  # (its own clock: retried within a minute)
            with self._progress:
                self._counts_done = asked
                self._progress.notify_all()
        else:
            feature_drift.write(self)

    def _retain(self) -> None:
        """The retention's thread: every RETENTION_SECONDS, or sooner when woken."""
        while not self._stop.is_set():
            self._retention_wake.wait(RETENTION_SECONDS)
            self._retention_wake.clear()
            if self._stop.is_set():
                break
            self._since_retention = 0
            try:
                self.apply_retention()
            except Exception as exc:  # the database away: the next round (said once)
                if not self._retention_failing:
                    log.warning("prediction log: retention failed (%s); retried each round",
                                type(exc).__name__)  # fmt: skip
                self._retention_failing = True
            else:
                self._retention_failing = False

    # --- the chunks ---------------------------------------------------------------------------

    def _move(self, everything: bool) -> None:
        """Queued entries into chunks (counted in the metrics and feature counts): all of them
        with ``everything``; else a batch when no chunk waits (in memory or the spool), and
        more only while a batch's worth is queued. Rows queued while a chunk waits stay queued
        until it is written: taken at once, the few rows that arrived during a round made a
        chunk of their own, the next round wrote one chunk and left that one waiting, and the
        thread never slept again (one-row wrk on PostgreSQL: ~130 COPY transactions a second
        of ~12 rows each, 110-160 µs of the writer thread's CPU per request; now ~15 µs)."""
        while self._queued_rows and (
            everything
            or self._queued_rows >= BATCH_ROWS
            or not (self._memory or len(self.spool))
        ):
            batch = self._take()
            if not batch:
                break
            self._observe(batch)
            feature_drift.record(self, batch)  # counted here, written each minute
            columns = self._columns(batch)
            n = len(columns[0])
            if n <= BATCH_ROWS:
                self._hold(columns)
                continue
            for start in range(0, n, BATCH_ROWS):  # (one request's 100,000 rows too)
                self._hold(_sliced(columns, start, start + BATCH_ROWS))

    def _hold(self, columns: Columns) -> None:
        """A chunk behind the others: in memory while the spool is empty and memory has room,
        else at the spool's end; dropped when the spool is full."""
        n = len(columns[0])
        if len(self.spool) == 0 and self._memory_rows + n <= MEMORY_ROWS:
            self._memory.append(columns)
            self._memory_rows += n
            return
        try:
            kept = self.spool.push(columns)
        except OSError as exc:
            log.warning("prediction log: spool file not writable (%s)", exc)
            kept = False
        if not kept:
            self._dropped_rows(n, "the spool file is full (MSVMAV_PREDICTION_LOG_SPOOL_MB)")

    def _oldest(self) -> Columns | None:
        if self._memory:
            return self._memory[0]
        return self.spool.peek() if len(self.spool) else None

    def _pop_oldest(self) -> int:
        if self._memory:
            n = len(self._memory.popleft()[0])
            self._memory_rows -= n
            return n
        return self.spool.pop()

    def _write_oldest(self) -> bool:
        """Write the oldest chunk; False when the database refused it (it stays first)."""
        columns = self._oldest()
        if columns is None:
            return True
        started = time.monotonic()
        try:
            self._store(columns)
        except Exception as exc:
            return self._refused(columns, exc)
        n = self._pop_oldest()
        self.writer_metrics.flushed(n, time.monotonic() - started)
        self.written += n
        self._finished(n)
        self._recovered()
        self._since_retention += n
        if self._since_retention >= max(self.max_rows // 10, BATCH_ROWS):
            self._retention_wake.set()
        return True

    def _refused(self, columns: Columns, exc: Exception) -> bool:
        """A fault of the database: back off. A row the database cannot store: the chunk
        split in halves (a single row: dropped and counted)."""
        self.writer_metrics.failed()
        names = {k.__name__ for k in type(getattr(exc, "orig", None) or exc).__mro__}
        if not names & _CONTENT_ERRORS or classify_fault(exc) is not None:
            now = time.monotonic()
            if self._failing_since is None:
                self._failing_since = now
                log.warning(
                    "prediction log: the database refused a write (%s); rows are kept "
                    "(memory, then the spool file) and retried",
                    type(exc).__name__,
                )
            self._retry_delay = min(RETRY_MAX, max(RETRY_FIRST, self._retry_delay * 2))
            self._retry_at = now + self._retry_delay
            return False
        self._pop_oldest()
        n = len(columns[0])
        if n == 1:
            log.warning("prediction log: a row the database cannot store was dropped (%s)",
                        type(exc).__name__)  # fmt: skip
            self.dropped += 1
            self._finished(1)
            return True
        half = n // 2  # (first in memory: memory is written before the spool)
        for part in (_sliced(columns, half, n), _sliced(columns, 0, half)):
            self._memory.appendleft(part)
            self._memory_rows += len(part[0])
        return True

    def _recovered(self) -> None:
        self._retry_delay = 0.0
        self._retry_at = 0.0
        if self._failing_since is not None:
            log.warning("prediction log: writing again after %.1f s (%d rows still to write)",
                        time.monotonic() - self._failing_since, self.pending())  # fmt: skip
            self._failing_since = None
        if self._drop_logged and not self._memory and not len(self.spool):
            self._drop_logged = False

    def _dropped_rows(self, n: int, why: str) -> None:
        """``n`` rows of a chunk dropped (0: a request's, counted by the queue already)."""
        if n:
            self.dropped += n
            self._finished(n)
        if not self._drop_logged:
            self._drop_logged = True
            log.warning("prediction log: rows dropped, %s; counted in "
                        "msvmav_prediction_log_dropped_total (logged once)", why)  # fmt: skip

    def _adopt(self) -> None:
        """The spool files of this database's writers that died: this writer's to write."""
        adopted, dropped = self.spool.adopt()
        if adopted or dropped:
            log.warning(
                "prediction log: adopted %d rows of a stopped writer's spool file "
                "(%d unreadable or beyond the bound, dropped)",
                adopted,
                dropped,
            )
            self.dropped += dropped
            with self._lock:
                self._accepted += adopted

    def _drain(self, deadline: float) -> None:
        """Everything queued, written until ``deadline`` (backing off as the thread does)."""
        self._move(everything=True)
        while self._oldest() is not None and time.monotonic() < deadline:
            if not self._write_oldest():
                time.sleep(max(0.0, min(self._retry_at, deadline) - time.monotonic()))

    def close(self) -> None:
        """Stop the threads, write what is left (at most CLOSE_SECONDS), and keep what the
        database still refuses in the spool file (adopted by the next writer)."""
        self._stop.set()
        self._wake.set()
        self._retention_wake.set()
        for thread in (self._thread, getattr(self, "_retention_thread", None)):
            if thread is not None:
                thread.join(timeout=30.0)
        with self._write_lock:
            self._drain(time.monotonic() + CLOSE_SECONDS)
            while self._memory:
                columns = self._memory.popleft()
                self._memory_rows -= len(columns[0])
                if not self.spool.push(columns):
                    self._dropped_rows(len(columns[0]), "the spool file is full at shutdown")
            if len(self.spool):
                log.warning("prediction log: %d rows left in %s for the next writer",
                            self.spool.rows, self.spool.path)  # fmt: skip
            self.spool.close()
            feature_drift.write(self, force=True)

    # --- writing ------------------------------------------------------------------------------

    def _store(self, columns: Columns) -> None:
        """One chunk in one transaction: COPY on PostgreSQL, multi-row INSERTs on SQLite."""
        n = len(columns[0])
        with self.engine.begin() as conn:
            if self.sqlite:
                at = 0
                for k in _chunks(n):
                    conn.exec_driver_sql(self._insert(k), _interleaved(columns, at, at + k))
                    at += k
                return
            cursor = conn.connection.driver_connection.cursor()
            with cursor, cursor.copy(_COPY) as copy:
                for row in zip(*columns, strict=True):
                    copy.write_row(row)

    def _columns(self, batch: list[Entry]) -> Columns:
        """The batch's rows as ten columns, in _INSERT's order (built in C, no tuple a row:
        the writer holds the GIL for as short a time as it can)."""
        columns: Columns = [[] for _ in range(_COLUMNS)]
        for entry in batch:
            for column, values in zip(columns, self._rows(entry), strict=True):
                column.extend(values)
        return columns

    def _insert(self, n: int) -> str:
        """The INSERT statement of ``n`` rows, in the driver's placeholder style."""
        statement = self._statements.get(n)
        if statement is None:
            sql = _INSERT + ", ".join(repeat(_VALUES, n))
            statement = self._statements[n] = placeholders(self.engine, sql)
        return statement

    def _observe(self, batch: list[Entry]) -> None:
        """The batch's rows counted in the metrics: a few NumPy calls per model, not per entry
        (some let go of the GIL, and each time the writer wanted it back, the event loop's
        thread waited for it, as with executemany)."""
        by_model: dict[int, list[Entry]] = {}
        for entry in batch:
            by_model.setdefault(entry[0], []).append(entry)
        for model_id, entries in by_model.items():
            decision = np.concatenate([_own_decision(e[6], e[7]) for e in entries])
            clipped = np.concatenate([e[8] for e in entries])
            self.metrics.observe(model_id, decision, clipped)

    def _rows(self, entry: Entry) -> tuple[Any, ...]:
        """The entry's rows, column by column (JSON types only: a chunk may go to the spool
        file)."""
        model_id, name, version, alias, at, ids, scores, predicted, clipped = entry[:9]
        n = len(ids)
        if scores.ndim == 1:
            decision, decisions = scores.tolist(), repeat(None, n)
        else:
            decision = scores[np.arange(n), predicted].tolist()
            decisions = map(json.dumps, scores.tolist())
        return (
            repeat(model_id, n),
            repeat(name, n),
            repeat(version, n),
            repeat(alias, n),
            map(str, ids),
            repeat(self._when(at, text=True), n),
            decision,
            decisions,
            predicted.tolist(),
            clipped.tolist(),
        )

    def _when(self, at: datetime, text: bool = False) -> Any:
        # As app.core.orm.UTCDateTime stores it: naive UTC text on SQLite (and ISO 8601 text
        # with its offset for COPY on PostgreSQL).
        if self.sqlite:  # (isoformat: the text of strftime("%Y-%m-%d %H:%M:%S.%f"), 1.6x faster)
            naive = (at if at.tzinfo is UTC else at.astimezone(UTC)).replace(tzinfo=None)
            return naive.isoformat(sep=" ", timespec="microseconds")
        return at.isoformat() if text else at

    def _delete_chunked(self, sql: str, bound: Any) -> int:
        statement = placeholders(self.engine, sql)
        deleted = 0
        while True:
            with self.engine.begin() as conn:
                count = conn.exec_driver_sql(statement, (bound, DELETE_CHUNK)).rowcount
            deleted += max(count, 0)
            if count < DELETE_CHUNK:
                break
        return deleted

    def _nth_newest(self, n: int) -> int | None:
        """The id of the (n+1)-th newest row (delete up to it), None when at most n rows."""
        low, high = self.fetch_one(_ID_RANGE, ()) or (None, None)  # reads: no lock
        if low is None or int(high) - int(low) + 1 <= n:
            return None
        row = self.fetch_one(_NTH_NEWEST, (n,))
        return None if row is None else int(row[0])

    def metric_lines(self) -> list[str]:
        """The writer's own lines of /metrics (see WriterMetrics)."""
        return self.writer_metrics.render(
            dropped=self.dropped,
            queued=self._queued_rows + self._memory_rows,
            spooled=self.spool.rows,
            spool_bytes=self.spool.held_bytes,
            pending=self.pending(),
        )


def _sliced(columns: Columns, start: int, stop: int) -> Columns:
    return [column[start:stop] for column in columns]


def spool_directory(settings: Settings, engine: Engine) -> Path:
    """The spool folder: MSVMAV_PREDICTION_LOG_SPOOL_DIR, else one per database (its URL's
    hash, without the password) under the system's temporary directory."""
    if settings.prediction_log_spool_dir:
        return Path(settings.prediction_log_spool_dir)
    url = engine.url.render_as_string(hide_password=True)
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"msvmav-prediction-log-{digest}"


def _chunks(n: int) -> Iterator[int]:
    """``n`` rows as INSERT statements of a few fixed sizes (VALUES_ROWS, a fifth of it, ...,
    1): the drivers' statement caches (SQLite's compiled statements, PostgreSQL's prepared ones)
    hold at most five of them, not one per remainder."""
    size = VALUES_ROWS
    while n > 0:
        while size > n:
            size = max(size // 5, 1)
        yield size
        n -= size


def _own_decision(scores: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Each row's decision value for its predicted class (multi-class: one of its scores)."""
    return scores if scores.ndim == 1 else scores[np.arange(len(predicted)), predicted]


def _interleaved(columns: list[list[Any]], start: int, stop: int) -> tuple[Any, ...]:
    """Rows ``start:stop`` of ``columns`` as one flat parameter tuple, row after row."""
    width = len(columns)
    flat: list[Any] = [None] * ((stop - start) * width)
    for j, column in enumerate(columns):
        flat[j::width] = column[start:stop]
    return tuple(flat)


def _made(runtime: Runtime) -> PredictionLogWriter | None:
    return PredictionLogWriter(runtime) if runtime.settings.prediction_log else None


#: The runtime's prediction log writer (None when the log is off: MSVMAV_PREDICTION_LOG).
PREDICTION_LOG: Part[PredictionLogWriter | None] = Part(
    "prediction log writer", _made, PredictionLogWriter.close
)


def writer(runtime: Runtime) -> PredictionLogWriter | None:
    """The log writer of ``runtime``'s database in this process; None when the log is off."""
    return runtime.get(PREDICTION_LOG)


def get_prediction_log(runtime: RuntimeDep) -> PredictionLogWriter | None:
    """The app's prediction log writer (None when the log is off): a typed dependency."""
    return writer(runtime)


PredictionLogDep = Annotated[PredictionLogWriter | None, Depends(get_prediction_log)]


def start(runtime: Runtime) -> None:
    """The app's start: when a stopped writer of this database left a spool file, this
    process's writer starts at once and adopts it (else on the first prediction)."""
    found = writer(runtime)
    if found is not None and found.spool.orphans():
        with found._lock:
            if found._thread is None:
                found._start()


def metric_lines(runtime: Runtime) -> list[str]:
    """/metrics' lines of this process: per-model prediction counts and decision histogram
    (rows taken off the log's queue: none when the log is off), the log writer's own, and the
    process's."""
    found = writer(runtime)
    lines = found.metrics.render() + found.metric_lines() if found is not None else []
    return lines + process_lines()
