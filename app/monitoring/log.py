"""The prediction log's writer: every row /predict scores, written off the request path.

A request only appends one tuple to a bounded in-memory queue (``PredictionLogWriter.record``);
a daemon thread per process and database writes the queue every ``FLUSH_SECONDS`` (sooner when
``BATCH_ROWS`` rows wait), at most ``BATCH_ROWS`` rows per transaction, each a short one, so on
SQLite the API and the workers get the write lock between batches; the rows go in multi-row
INSERT statements of ``VALUES_ROWS`` rows (see there why not ``executemany``). When the queue holds
``QUEUE_ROWS`` rows a request's rows are dropped and counted (``dropped``), never waited for.
The same thread applies the retention (``MSVMAV_PREDICTION_LOG_DAYS`` and ``_MAX_ROWS``) every
``RETENTION_SECONDS``, deleting in chunks of ``DELETE_CHUNK`` rows, one transaction each.
``close`` (the app's shutdown) writes what is left.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.pool import Pool

from app.core.config import Settings
from app.core.db import fetch_one, placeholders
from app.monitoring import feature_drift
from app.monitoring.background import BatchQueue
from app.monitoring.metrics import PredictionMetrics, process_lines

log = logging.getLogger("app.monitoring.log")

QUEUE_ROWS = 1_000_000
BATCH_ROWS = 20_000
FLUSH_SECONDS = 0.5
RETENTION_SECONDS = 60.0
DELETE_CHUNK = 5_000
WRITER_NICE = 10

_INSERT = (
    "INSERT INTO prediction_log (model_id, registered_model, version, alias, prediction_id, "
    "created_at, decision, decisions, predicted, clipped) VALUES "
)
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

# (model_id, registered model, version, alias, time, ids, scores, predicted indices, clipped,
# and optionally the scaled features: app.monitoring.feature_drift)
Entry = tuple[Any, ...]


class PredictionLogWriter(BatchQueue[Entry]):
    """The queue and the thread writing it for one database (see the module's docstring)."""

    label = "prediction log"

    def __init__(self, engine: Engine, settings: Settings) -> None:
        super().__init__()
        self.engine = engine
        self.days = settings.prediction_log_days
        self.max_rows = settings.prediction_log_max_rows
        self.sqlite = engine.dialect.name == "sqlite"
        self.written = 0
        self._next_retention = 0.0
        self._statements: dict[int, str] = {}  # INSERT statements by their number of rows
        self.metrics = PredictionMetrics()  # counted as rows leave the queue

    def record(self, entry: Entry) -> bool:
        """Queue a request's rows (never blocks on I/O); False when they were dropped."""
        return self._put(entry, lambda e: feature_drift.admit(self, e))

    def _rows_of(self, entry: Entry) -> int:
        return len(entry[5])

    def _limits(self) -> tuple[int, int, float]:
        return QUEUE_ROWS, BATCH_ROWS, FLUSH_SECONDS

    def flush(self) -> None:
        """Write every queued row now (each batch its own transaction)."""
        with self._write_lock:
            while True:
                batch = self._take()
                if not batch:
                    break
                self._observe(batch)
                feature_drift.record(self, batch)  # counted here, written each minute
                self._write(batch)
            feature_drift.write(self, force=self._stop.is_set())

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

    # --- the thread ---------------------------------------------------------------------------

    def _on_start(self) -> None:
        _lower_priority()

    def _tick(self) -> None:
        self._guarded(self.flush)
        if time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + RETENTION_SECONDS
            self._guarded(self.apply_retention)

    def _write(self, batch: list[Entry]) -> None:
        """The batch's rows, at most BATCH_ROWS per transaction (one request's 100,000 rows
        too: the write lock is free between them)."""
        columns = self._columns(batch)
        total = len(columns[0])
        for start in range(0, total, BATCH_ROWS):
            end = min(start + BATCH_ROWS, total)
            try:
                with self.engine.begin() as conn:
                    at = start
                    for k in _chunks(end - start):
                        conn.exec_driver_sql(self._insert(k), _interleaved(columns, at, at + k))
                        at += k
            except Exception:
                self.dropped += total - start
                raise
            self.written += end - start

    def _columns(self, batch: list[Entry]) -> list[list[Any]]:
        """The batch's rows as ten columns, in _INSERT's order (built in C, no tuple a row:
        the writer holds the GIL for as short a time as it can)."""
        columns: list[list[Any]] = [[] for _ in range(_COLUMNS)]
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

    def _rows(self, entry: Entry) -> tuple[Iterable[Any], ...]:
        """The entry's rows, column by column."""
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
            repeat(self._when(at), n),
            decision,
            decisions,
            predicted.tolist(),
            clipped.tolist(),
        )

    def _when(self, at: datetime) -> Any:
        # As app.core.orm.UTCDateTime stores it: naive UTC text on SQLite.
        if self.sqlite:
            return at.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
        return at

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
        low, high = fetch_one(self.engine, _ID_RANGE, ()) or (None, None)  # reads: no lock
        if low is None or int(high) - int(low) + 1 <= n:
            return None
        row = fetch_one(self.engine, _NTH_NEWEST, (n,))
        return None if row is None else int(row[0])


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


def _lower_priority() -> None:
    """Linux: the calling thread's nice value raised by WRITER_NICE (threads have their own
    there), so that when the cores are busy they go to the requests first: a 100,000-row
    request's rows cost SQLite some 0.4 s of CPU to insert, and the writer can wait (its queue
    is bounded)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + WRITER_NICE)
    except OSError:  # not allowed here: the writer runs at the process's priority
        log.warning("prediction log: could not lower the writer thread's priority")


def _interleaved(columns: list[list[Any]], start: int, stop: int) -> tuple[Any, ...]:
    """Rows ``start:stop`` of ``columns`` as one flat parameter tuple, row after row."""
    width = len(columns)
    flat: list[Any] = [None] * ((stop - start) * width)
    for j, column in enumerate(columns):
        flat[j::width] = column[start:stop]
    return tuple(flat)


# One writer per connection pool (an engine and its execution_options() copies share one).
_writers: weakref.WeakKeyDictionary[Pool, PredictionLogWriter] = weakref.WeakKeyDictionary()
_writers_lock = threading.Lock()


def writer(engine: Engine, settings: Settings) -> PredictionLogWriter | None:
    """The log writer of ``engine``'s database in this process; None when the log is off."""
    if not settings.prediction_log:
        return None
    found = _writers.get(engine.pool)
    if found is not None:
        return found
    with _writers_lock:
        found = _writers.get(engine.pool)
        if found is None:
            found = _writers[engine.pool] = PredictionLogWriter(engine, settings)
        return found


def close(engine: Engine) -> None:
    """Stop and flush ``engine``'s writer, if it has one (the app's shutdown)."""
    with _writers_lock:
        found = _writers.pop(engine.pool, None)
    if found is not None:
        found.close()


def metric_lines(engine: Engine, settings: Settings) -> list[str]:
    """/metrics' lines of this process: per-model prediction counts and decision histogram
    (rows taken off the log's queue: none when the log is off), and the process's own."""
    found = writer(engine, settings)
    lines = found.metrics.render() if found is not None else []
    return lines + process_lines()
