"""app.monitoring.window reads a window's logged rows straight off the DBAPI cursor: every
column must equal what the ORM loads row by row (its JSON, Boolean and UTC datetime types),
newest first, within [since, until) and the limit; rows without a decision vector (SQL NULL
or JSON null) must not shift the others, and vectors of another length are no (n, k) array."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from app.monitoring import window
from app.monitoring.orm import PredictionLog

T0 = datetime(2026, 3, 1, 22, 30, tzinfo=UTC)


def _rows(rng: np.random.Generator, n: int, k: int | None) -> list[PredictionLog]:
    out = []
    for i in range(n):
        vector = None if k is None else (rng.normal(size=k) * 10.0 ** rng.integers(-8, 8)).tolist()
        out.append(PredictionLog(
            model_id=7, prediction_id=f"p{i}", created_at=T0 + timedelta(minutes=7 * i),
            decision=float(rng.normal()) * 1e-3 ** (i % 3), decisions=vector,
            predicted=int(rng.integers(0, k or 2)), clipped=bool(i % 4 == 0),
            true_class=None if i % 3 else int(rng.integers(0, k or 2)),
        ))  # fmt: skip
    return out


def _expected(engine, since=None, until=None, limit=10**6) -> list[PredictionLog]:
    stmt = select(PredictionLog).where(PredictionLog.model_id == 7)
    if since is not None:
        stmt = stmt.where(PredictionLog.created_at >= since)
    if until is not None:
        stmt = stmt.where(PredictionLog.created_at < until)
    with Session(engine) as s:
        return list(s.scalars(stmt.order_by(PredictionLog.id.desc()).limit(limit)))


def _check(cols: window.Columns, rows: list[PredictionLog], vectors: bool) -> None:
    assert len(cols) == len(rows)
    assert cols.decision.tolist() == [r.decision for r in rows]
    assert cols.predicted.tolist() == [r.predicted for r in rows]
    assert cols.clipped.tolist() == [r.clipped for r in rows]
    assert cols.true_class.tolist() == [
        window.NO_CLASS if r.true_class is None else r.true_class for r in rows
    ]
    assert cols.minutes.tolist() == [
        r.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
        for r in rows if r.true_class is not None
    ]
    if not vectors:
        assert cols.decisions is None
        return
    assert cols.has_decisions.tolist() == [r.decisions is not None for r in rows]
    for got, r in zip(cols.decisions, rows, strict=True):
        if r.decisions is None:
            assert np.isnan(got).all()
        else:
            assert got.tolist() == r.decisions  # bit for bit


def test_columns_equal_the_orm_rows(engine):
    rng = np.random.default_rng(3)
    rows = _rows(rng, 300, 3)
    rows[5].decisions = None  # SQL NULL or JSON null: no vector, the others unshifted
    with Session(engine) as s:
        s.add_all(rows)
        s.add(PredictionLog(model_id=8, prediction_id="other", created_at=T0, decision=1.0,
                            predicted=0, clipped=False))  # fmt: skip
        s.commit()
    since, until = T0 + timedelta(hours=3), T0 + timedelta(hours=20)
    everything, part = _expected(engine), _expected(engine, since, until, 50)
    with Session(engine) as s:
        _check(window.read(s, 7, None, None, 10**6, True), everything, True)
        _check(window.read(s, 7, None, None, 10**6, False), everything, False)
        _check(window.read(s, 7, since, until, 50, True), part, True)
        assert len(window.read(s, 7, T0 + timedelta(days=30), None, 10, True)) == 0
        days = {m[:10] for m in window.read(s, 7, None, None, 10**6, False).minutes.tolist()}
    assert len(days) > 1  # the labelled rows span several UTC days


def test_vectors_of_another_length_are_not_reshaped():
    """Two rows of 2 and 4 numbers among 3-number rows: as many numbers and commas in all as
    ten rows of 3, yet no (10, 3) array may come of them."""
    rows = [json.dumps([float(i), i + 0.5, -i / 3]) for i in range(10)]
    rows[2], rows[6] = json.dumps([1.0, 2.0]), json.dumps([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError):
        window._vectors(tuple(rows))
    rows[2], rows[6] = "null", None
    got, has = window._vectors(tuple(rows))
    assert has.tolist() == [i not in (2, 6) for i in range(10)]
    assert np.isnan(got[[2, 6]]).all()
    assert got[has].tolist() == [json.loads(t) for t in rows if t not in (None, "null")]


def _statements(engine) -> list[tuple[str, tuple]]:
    """The SQL statements (and parameters) run on ``engine`` from now on."""
    seen: list[tuple[str, tuple]] = []

    @event.listens_for(engine, "before_cursor_execute")
    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    return seen


def _check_both(engine) -> None:
    """The whole window with vectors and the newest 150 rows without, against the ORM."""
    everything, newest = _expected(engine), _expected(engine, limit=150)
    with Session(engine) as s:
        _check(window.read(s, 7, None, None, 10**6, True), everything, True)
        _check(window.read(s, 7, None, None, 150, False), newest, False)


def test_a_kept_window_reads_only_the_new_rows_and_follows_feedback_and_deletes(engine):
    """A second read of a window: the rows written since, the feedback given since (on old rows
    too) and the oldest rows deleted (retention) are all seen, equal to the ORM's rows; on
    SQLite only the rows above the kept ones are stepped through again."""
    rng = np.random.default_rng(5)
    first = _rows(rng, 200, 3)
    with Session(engine) as s:
        s.add_all(first)
        s.commit()
    _check_both(engine)
    more = _rows(rng, 40, 3)
    with Session(engine) as s:
        s.add_all(more)
        oldest = s.scalars(select(PredictionLog).order_by(PredictionLog.id).limit(5)).all()
        for r in oldest:
            s.delete(r)
        relabelled = s.scalars(select(PredictionLog).order_by(PredictionLog.id).offset(20)).first()
        relabelled.true_class = 2 if relabelled.true_class != 2 else 0
        newest_kept = s.scalar(select(func.max(PredictionLog.id)).where(
            PredictionLog.id.not_in([r.id for r in more])))
        s.commit()
    seen = _statements(engine)
    _check_both(engine)
    if engine.dialect.name == "sqlite":
        row_reads = [p for q, p in seen if "prediction_log.id > " in q]
        assert row_reads and all(newest_kept in p for p in row_reads), row_reads
