"""The logged rows of a monitoring window as numpy columns: one Core select (no ORM entity,
no per-row object kept), the newest ``limit`` rows of a model in [since, until), newest first.

The rows come off the DBAPI cursor as plain tuples (SQLAlchemy builds the statement, not
the rows) and each column goes straight into an array. Only what the
report needs per row is read: the decision value, the predicted and true class indices (the
true one ``-1`` without feedback), the clipped flag; the UTC day only of rows with feedback
(a ``CASE`` leaves the others' NULL, so only they are converted); and the full one-vs-rest
vectors (the JSON ``decisions``) only when asked, parsed at once from their texts joined (the
same floats as one ``json.loads`` per row).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import Text, case, cast, func, literal, select
from sqlalchemy.orm import Session

from app.monitoring.orm import PredictionLog

NO_CLASS = -1  # ``true_class`` of a row without feedback


@dataclass
class Columns:
    """A window's rows, newest first: ``decision`` (n,), ``predicted`` and ``true_class``
    (n,) int64 (``NO_CLASS`` without feedback), ``clipped`` (n,) bool, ``days`` (the UTC day
    of each row with feedback, in row order), and, when read, ``decisions`` (m, k) of the
    ``has_decisions`` rows (n,) bool."""

    decision: np.ndarray
    predicted: np.ndarray
    true_class: np.ndarray
    clipped: np.ndarray
    days: np.ndarray
    decisions: np.ndarray | None = None
    has_decisions: np.ndarray | None = None

    @property
    def labelled(self) -> np.ndarray:
        return self.true_class != NO_CLASS

    def __len__(self) -> int:
        return int(self.decision.size)


def _day(value: datetime | str) -> str:
    """The UTC day of a raw ``created_at``: SQLite's naive-UTC text, PostgreSQL's datetime."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    return aware.astimezone(UTC).date().isoformat()


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


def read(
    session: Session,
    model_id: int,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    with_decisions: bool,
) -> Columns:
    """The newest ``limit`` logged rows of ``model_id`` in [since, until) (module docstring);
    ``decisions`` read only ``with_decisions``."""
    log = PredictionLog
    labelled_at = case((log.true_class.is_not(None), log.created_at), else_=None)
    vectors = cast(log.decisions, Text) if with_decisions else literal(None, Text)
    stmt = select(
        log.decision,
        log.predicted,
        func.coalesce(log.true_class, NO_CLASS),
        log.clipped,
        labelled_at.label("labelled_at"),
        vectors.label("decisions"),
    ).where(log.model_id == model_id)
    if since is not None:
        stmt = stmt.where(log.created_at >= since)
    if until is not None:
        stmt = stmt.where(log.created_at < until)
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
    days = np.array([_day(t) for t in at if t is not None], dtype=str)
    out = Columns(
        decision=np.array(decision, dtype=np.float64),
        predicted=np.array(predicted, dtype=np.int64),
        true_class=np.array(true_class, dtype=np.int64),
        clipped=np.array(clipped, dtype=bool),
        days=days,
    )
    if with_decisions:
        out.decisions, out.has_decisions = _vectors(texts)
    return out
