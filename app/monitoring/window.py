"""The logged rows of a monitoring window as numpy columns: one Core select (no ORM entity,
no per-row object kept), the newest ``limit`` rows of a model in [since, until), newest first.

The rows come off the DBAPI cursor as plain tuples (SQLAlchemy builds the statement, not
the rows) and each column goes straight into an array. Only what the
report needs per row is read: the decision value, the predicted and true class indices (the
true one ``-1`` without feedback), the clipped flag; the UTC minute only of rows with feedback
(a ``CASE`` leaves the others' NULL, so only they are converted); and the full one-vs-rest
vectors (the JSON ``decisions``) only when asked, parsed at once from their texts joined (the
same floats as one ``json.loads`` per row).

On SQLite a window is read once and kept (``_WindowCache``, per engine, model and window): a
later report reads only the rows written since (ids above the kept ones: SQLite's single
writer gives ids in commit order), drops those deleted at the old end (retention), and reads
the feedback columns (``true_class``, the day) of the window's labelled rows again, since
feedback may change them. Python's sqlite3 lets go of the GIL and takes it back for every row
it steps through, and under /predict's load each take waited for the event loop's thread:
reading 30,000 rows again for every report cost seconds, reading the few thousand new ones
does not. A window whose row count then differs from the database's is read whole again.
PostgreSQL reads the whole window every time (its ids are not in commit order).
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Text, case, cast, func, literal, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from app.monitoring.orm import PredictionLog

NO_CLASS = -1  # ``true_class`` of a row without feedback
# Windows kept per engine on SQLite (the most recently read), and their rows in all at most.
CACHED_WINDOWS = 8
MAX_KEPT_ROWS = 2_000_000


@dataclass
class Columns:
    """A window's rows, newest first: ``decision`` (n,), ``predicted`` and ``true_class``
    (n,) int64 (``NO_CLASS`` without feedback), ``clipped`` (n,) bool, ``minutes`` (the UTC
    minute of each row with feedback, ``YYYY-MM-DDTHH:MM``, in row order: its first 10 or 13
    characters are its day or hour), and, when read, ``decisions`` (m, k) of the
    ``has_decisions`` rows (n,) bool."""

    decision: np.ndarray
    predicted: np.ndarray
    true_class: np.ndarray
    clipped: np.ndarray
    minutes: np.ndarray
    decisions: np.ndarray | None = None
    has_decisions: np.ndarray | None = None

    @property
    def labelled(self) -> np.ndarray:
        return self.true_class != NO_CLASS

    def __len__(self) -> int:
        return int(self.decision.size)


def _minute(value: datetime | str) -> str:
    """The UTC minute (``YYYY-MM-DDTHH:MM``) of a raw ``created_at``: SQLite's naive-UTC text,
    PostgreSQL's datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def _parse(texts: list[str]) -> np.ndarray:
    """JSON arrays of k numbers each as an (m, k) array: their texts joined and parsed by
    ``np.fromstring`` (correctly rounded, as ``json.loads``' ``float``) when each has k
    numbers; else one ``json.loads`` of them all (ragged: a ValueError, as before)."""
    joined = ",".join(texts)
    k = texts[0].count(",") + 1
    if all(t.count(",") == k - 1 for t in texts):
        flat = joined.replace("[", " ").replace("]", " ")
        values = np.fromstring(flat, dtype=np.float64, sep=",")
        if values.size == len(texts) * k:
            return values.reshape(len(texts), k)
    return np.array(json.loads("[" + joined + "]"), dtype=np.float64)


def _vectors(texts: tuple[str | None, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(n, k) vectors aligned with the rows (NaN where a row has none) and which rows have one
    (not SQL NULL nor the JSON null SQLAlchemy's JSON type writes for None)."""
    has = np.fromiter((t is not None and t != "null" for t in texts), dtype=bool, count=len(texts))
    if not has.any():
        return np.full((len(texts), 0), np.nan), has
    vectors = _parse([t for t in texts if t is not None and t != "null"])
    if has.all():
        return vectors, has
    out = np.full((len(texts), vectors.shape[1]), np.nan)
    out[has] = vectors
    return out, has


def _where(stmt: Any, model_id: int, since: datetime | None, until: datetime | None) -> Any:
    """``stmt`` restricted to the model's rows in [since, until)."""
    stmt = stmt.where(PredictionLog.model_id == model_id)
    if since is not None:
        stmt = stmt.where(PredictionLog.created_at >= since)
    if until is not None:
        stmt = stmt.where(PredictionLog.created_at < until)
    return stmt


def _fetch(session: Session, stmt: Any) -> list[tuple]:
    """The rows of a Core select as the DBAPI cursor gives them (plain tuples)."""
    result = session.connection().execute(stmt)
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


def read_whole(
    session: Session,
    model_id: int,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    with_decisions: bool,
) -> Columns:
    """The newest ``limit`` logged rows of ``model_id`` in [since, until) (module docstring),
    read from the database whole; ``decisions`` read only ``with_decisions``."""
    log = PredictionLog
    labelled_at = case((log.true_class.is_not(None), log.created_at), else_=None)
    vectors = cast(log.decisions, Text) if with_decisions else literal(None, Text)
    stmt = _where(select(
        log.decision,
        log.predicted,
        func.coalesce(log.true_class, NO_CLASS),
        log.clipped,
        labelled_at.label("labelled_at"),
        vectors.label("decisions"),
    ), model_id, since, until)
    # Core, not the ORM; the rows straight off the DBAPI cursor (no Row objects, no per-value
    # result processing: the few conversions needed are done per column below).
    result = session.connection().execute(stmt.order_by(log.id.desc()).limit(limit))
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return Columns(np.zeros(0), empty, empty, np.zeros(0, dtype=bool), np.array([], dtype=str),
                       np.zeros((0, 0)) if with_decisions else None,
                       np.zeros(0, dtype=bool) if with_decisions else None)  # fmt: skip
    decision, predicted, true_class, clipped, at, texts = zip(*rows, strict=True)
    minutes = np.array([_minute(t) for t in at if t is not None], dtype=str)
    out = Columns(
        decision=np.array(decision, dtype=np.float64),
        predicted=np.array(predicted, dtype=np.int64),
        true_class=np.array(true_class, dtype=np.int64),
        clipped=np.array(clipped, dtype=bool),
        minutes=minutes,
    )
    if with_decisions:
        out.decisions, out.has_decisions = _vectors(texts)
    return out


@dataclass(frozen=True)
class _Kept:
    """A window's rows as kept between reports, oldest first (ascending ``ids``); the feedback
    columns are read again every time."""

    ids: np.ndarray
    decision: np.ndarray
    predicted: np.ndarray
    clipped: np.ndarray
    decisions: np.ndarray | None
    has_decisions: np.ndarray | None

    def tail(self, start: int) -> _Kept:
        """The rows from position ``start`` on."""
        cut = {k: None if v is None else v[start:] for k, v in vars(self).items()}
        return replace(self, **cut)


def _concat(old: _Kept, new: _Kept) -> _Kept | None:
    """``old`` then ``new``; None when their decision vectors do not line up (read whole)."""
    if old.decisions is not None and old.decisions.shape[1:] != new.decisions.shape[1:]:
        return None
    parts = {k: None if v is None else np.concatenate([v, getattr(new, k)])
             for k, v in vars(old).items()}  # fmt: skip
    return _Kept(**parts)


class _WindowCache:
    """The windows read last, per engine (weakly: a disposed engine's go with it): at most
    ``CACHED_WINDOWS`` of them and ``MAX_KEPT_ROWS`` rows in all, the least recently read
    dropped first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: weakref.WeakKeyDictionary[Engine, OrderedDict[tuple, _Kept]] = (
            weakref.WeakKeyDictionary())

    def get(self, engine: Engine, key: tuple) -> _Kept | None:
        with self._lock:
            return self._windows.get(engine, {}).get(key)

    def put(self, engine: Engine, key: tuple, kept: _Kept | None) -> None:
        with self._lock:
            windows = self._windows.setdefault(engine, OrderedDict())
            windows.pop(key, None)
            if kept is None:
                return
            windows[key] = kept
            while len(windows) > CACHED_WINDOWS or (
                    len(windows) > 1 and sum(w.ids.size for w in windows.values()) > MAX_KEPT_ROWS):
                windows.popitem(last=False)


_CACHE = _WindowCache()


def _extent(session: Session, model_id: int, since: datetime | None, until: datetime | None,
            limit: int) -> tuple[int, int | None, int | None]:
    """(rows, lowest id, highest id) of the window: one row, counted by SQLite itself."""
    inner = _where(select(PredictionLog.id), model_id, since, until)
    inner = inner.order_by(PredictionLog.id.desc()).limit(limit).subquery()
    ((n, low, high),) = _fetch(session, select(func.count(), func.min(inner.c.id),
                                               func.max(inner.c.id)))
    return int(n), low, high


def _rows_between(session: Session, window: tuple, after: int, high: int) -> _Kept:
    """The window's rows with ``after`` < id <= ``high`` (the newest ``limit``), oldest first."""
    model_id, since, until, limit, with_decisions = window
    log = PredictionLog
    vectors = cast(log.decisions, Text) if with_decisions else literal(None, Text)
    stmt = _where(select(log.id, log.decision, log.predicted, log.clipped, vectors),
                  model_id, since, until).where(log.id > after, log.id <= high)
    rows = _fetch(session, stmt.order_by(log.id.desc()).limit(limit))[::-1]
    ids, decision, predicted, clipped, texts = zip(*rows, strict=True) if rows else ((),) * 5
    vectors_of = _vectors(texts) if with_decisions and rows else (None, None)
    if with_decisions and not rows:
        vectors_of = (np.zeros((0, 0)), np.zeros(0, dtype=bool))
    return _Kept(np.array(ids, dtype=np.int64), np.array(decision, dtype=np.float64),
                 np.array(predicted, dtype=np.int64), np.array(clipped, dtype=bool),
                 *vectors_of)  # fmt: skip


def _refreshed(session: Session, kept: _Kept | None, window: tuple, low: int,
               high: int) -> _Kept | None:
    """``kept`` without the rows below ``low`` and with the rows written up to ``high``; None
    when it cannot be brought up to date (read whole)."""
    if kept is None or (kept.ids.size and kept.ids[-1] > high):
        return None
    kept = kept.tail(int(np.searchsorted(kept.ids, low, side="left")))
    after = int(kept.ids[-1]) if kept.ids.size else low - 1
    if after >= high:
        return kept
    return _concat(kept, _rows_between(session, window, after, high))


def _feedback(session: Session, kept: _Kept, window: tuple, low: int,
              high: int) -> tuple[np.ndarray, np.ndarray]:
    """The kept rows' true class indices (``NO_CLASS`` without feedback), oldest first, and the
    UTC minutes of the labelled ones, newest first."""
    model_id, since, until, _, _ = window
    log = PredictionLog
    stmt = _where(select(log.id, log.true_class, log.created_at), model_id, since, until).where(
        log.true_class.is_not(None), log.id >= low, log.id <= high)
    rows = _fetch(session, stmt.order_by(log.id.desc()))
    true_class = np.full(kept.ids.size, NO_CLASS, dtype=np.int64)
    if not rows:
        return true_class, np.array([], dtype=str)
    ids, classes, at = zip(*rows, strict=True)
    labelled_ids = np.array(ids, dtype=np.int64)
    where = np.searchsorted(kept.ids, labelled_ids)
    found = (where < kept.ids.size) & (kept.ids[np.minimum(where, kept.ids.size - 1)]
                                       == labelled_ids)
    true_class[where[found]] = np.array(classes, dtype=np.int64)[found]
    minutes = np.array([_minute(t) for t, f in zip(at, found, strict=True) if f], dtype=str)
    return true_class, minutes


def read(
    session: Session,
    model_id: int,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    with_decisions: bool,
) -> Columns:
    """The newest ``limit`` logged rows of ``model_id`` in [since, until), newest first (the
    module's docstring: kept between reports on SQLite); ``decisions`` only ``with_decisions``."""
    bind = session.get_bind()
    engine = getattr(bind, "engine", bind)
    if engine.dialect.name != "sqlite":
        return read_whole(session, model_id, since, until, limit, with_decisions)
    window = (model_id, since, until, limit, with_decisions)
    n, low, high = _extent(session, model_id, since, until, limit)
    if n == 0:
        _CACHE.put(engine, window, None)
        return read_whole(session, model_id, since, until, limit, with_decisions)
    kept = _refreshed(session, _CACHE.get(engine, window), window, low, high)
    if kept is None or kept.ids.size != n:
        kept = _rows_between(session, window, low - 1, high)
    if kept.ids.size == 0:  # deleted meanwhile
        _CACHE.put(engine, window, None)
        return read_whole(session, model_id, since, until, limit, with_decisions)
    _CACHE.put(engine, window, kept)
    true_class, minutes = _feedback(session, kept, window, int(kept.ids[0]), high)
    newest_first = {k: None if v is None else v[::-1].copy() for k, v in vars(kept).items()}
    del newest_first["ids"]
    return Columns(true_class=true_class[::-1].copy(), minutes=minutes, **newest_first)
