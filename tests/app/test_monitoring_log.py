"""The prediction log: every row /predict and /predict/file score, written by a background
writer in batches; the off switch; a full queue drops (and counts) instead of blocking; the
retention by age and by rows; the app's shutdown writes what is queued."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select

from app.main import create_app
from app.monitoring import log as prediction_log
from app.monitoring.orm import PredictionLog
from tests.app.support import blobs, to_csv, trained_model, wait_for
from tests.wait_support import wait_until


def _writer(app) -> prediction_log.PredictionLogWriter:
    found = prediction_log.writer(app.state.runtime)
    assert found is not None
    return found


def _logged(app) -> list[PredictionLog]:
    _writer(app).flush()
    with app.state.session_factory() as session:
        return list(session.scalars(select(PredictionLog).order_by(PredictionLog.id)))


def test_rows_logged_as_answered(client, worker, app):
    model = trained_model(client, worker)
    X, _ = blobs(n=4, seed=3)
    X[2, 0] = 1e6
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": X.tolist(), "ids": ["a", 2, "c", 4]}
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    rows = _logged(app)
    assert [row.prediction_id for row in rows] == ["a", "2", "c", "4"]
    assert {row.model_id for row in rows} == {model["id"]}
    assert [row.decision for row in rows] == [p["decision_value"] for p in answer["predictions"]]
    classes = answer["classes"]
    assert [classes[row.predicted] for row in rows] == [p["label"] for p in answer["predictions"]]
    assert [row.clipped for row in rows] == [p["clipped"] for p in answer["predictions"]]
    assert rows[2].clipped is True
    assert all(row.registered_model is None and row.decisions is None for row in rows)
    now = datetime.now(UTC)
    assert all(now - timedelta(minutes=1) < row.created_at <= now for row in rows)
    # A rejected request logs nothing.
    bad = client.post(
        "/predict", json={"model_id": model["id"], "instances": X.tolist(), "labels": ["neg"]}
    )
    assert bad.status_code == 422
    assert len(_logged(app)) == 4


def test_reference_and_file_and_multiclass_logged(client, worker, app):
    X, y = blobs(n=60, classes=("a", "b", "c"), shift=4.0)
    model = trained_model(client, worker, content=to_csv(X, y))
    assert client.post("/registered-models", json={"name": "tri"}).status_code == 201
    r = client.post("/registered-models/tri/versions", json={"model_id": model["id"]})
    assert r.status_code == 201, r.text
    r = client.put("/registered-models/tri/aliases/production", json={"version": 1})
    assert r.status_code in (200, 201), r.text
    r = client.post("/predict", json={"model": "tri@production", "instances": X[:2].tolist()})
    assert r.status_code == 200, r.text
    files = {"file": ("rows.csv", to_csv(X[2:5], y[2:5]))}
    f = client.post("/predict/file", files=files, data={"model_id": str(model["id"])})
    assert f.status_code == 200, f.text
    rows = _logged(app)
    assert [(row.registered_model, row.version, row.alias) for row in rows] == [
        ("tri", 1, "production")
    ] * 2 + [(None, None, None)] * 3
    answers = r.json()["predictions"] + f.json()["predictions"]
    assert [row.prediction_id for row in rows] == [p["id"] for p in answers]
    np.testing.assert_array_equal(
        [row.decisions for row in rows], [p["decision_values"] for p in answers]
    )
    assert [row.decision for row in rows] == [p["decision_value"] for p in answers]


def test_log_off_writes_nothing(settings, engine, worker):
    app = create_app(settings.model_copy(update={"prediction_log": False}))
    with TestClient(app) as client:
        model = trained_model(client, worker)
        r = client.post("/predict", json={"model_id": model["id"], "instances": [[0, 0, 0]]})
        assert r.status_code == 200, r.text
        assert prediction_log.writer(app.state.runtime) is None
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(PredictionLog)) == 0


def test_shutdown_writes_what_is_queued(settings, engine, worker, monkeypatch):
    monkeypatch.setattr(prediction_log, "FLUSH_SECONDS", 3600.0)  # only the shutdown writes
    app = create_app(settings)
    with TestClient(app) as client:
        model = trained_model(client, worker)
        X, _ = blobs(n=5, seed=1)
        assert client.post("/predict", json={"model_id": model["id"], "instances": X.tolist()})
        writer = _writer(app)
        assert writer.pending() == 5 and writer.written == 0
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(PredictionLog)) == 5
    assert writer.written == 5


def test_full_queue_drops_and_counts(client, worker, app, monkeypatch):
    monkeypatch.setattr(prediction_log, "QUEUE_ROWS", 6)
    monkeypatch.setattr(prediction_log, "FLUSH_SECONDS", 3600.0)
    model = trained_model(client, worker)
    X, _ = blobs(n=4, seed=1)
    body = {"model_id": model["id"], "instances": X.tolist()}
    writer = _writer(app)
    writer.flush()
    assert client.post("/predict", json=body).status_code == 200  # 4 queued
    assert client.post("/predict", json=body).status_code == 200  # 8 > 6: dropped
    assert writer.dropped == 4 and writer.pending() == 4
    assert len(_logged(app)) == 4


def _entry(model_id: int, at: datetime, n: int, first: int = 0) -> prediction_log.Entry:
    scores = np.linspace(-1, 1, n)
    return (
        model_id, None, None, None, at, list(range(first, first + n)), scores,
        (scores > 0).astype(int), np.zeros(n, dtype=bool),
    )  # fmt: skip


def test_retention_by_age_and_by_rows(app, engine, monkeypatch):
    monkeypatch.setattr(prediction_log, "DELETE_CHUNK", 4)  # several chunks
    writer = _writer(app)
    now = datetime.now(UTC)
    writer.record(_entry(1, now - timedelta(days=writer.days + 1), 9, first=0))  # too old
    writer.record(_entry(1, now - timedelta(days=writer.days - 1), 6, first=100))
    writer.record(_entry(2, now, 5, first=200))
    writer.flush()
    assert writer.apply_retention(now) == 9
    rows = _logged(app)
    assert [int(r.prediction_id) for r in rows] == [*range(100, 106), *range(200, 205)]
    writer.max_rows = 7
    assert writer.apply_retention(now) == 4
    assert [int(r.prediction_id) for r in _logged(app)] == [*range(104, 106), *range(200, 205)]


@pytest.mark.parametrize("n", [1, 45])
def test_batches_written_by_the_thread(app, n, monkeypatch):
    """The thread writes without flush(); a large request goes in several transactions of at
    most BATCH_ROWS rows, each (SQLite) in multi-row INSERT statements of at most VALUES_ROWS
    rows (one call into the driver each, never one per row) and of a few sizes only, or
    (PostgreSQL) one COPY."""
    monkeypatch.setattr(prediction_log, "BATCH_ROWS", 10)
    monkeypatch.setattr(prediction_log, "VALUES_ROWS", 4)
    monkeypatch.setattr(prediction_log, "RETENTION_SECONDS", 3600.0)  # only the log's inserts
    writer = _writer(app)
    if not writer.sqlite:
        _copied_in_batches(app, writer, n)
        return
    inserts: list[int] = []  # rows per statement; 0 ends a transaction

    def count(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        if statement.startswith("INSERT INTO prediction_log"):
            assert not executemany
            inserts.append(len(parameters) // 10)  # ten columns a row

    def commit(conn):  # noqa: ANN001
        inserts.append(0)

    event.listen(app.state.engine, "before_cursor_execute", count)
    event.listen(app.state.engine, "commit", commit)
    try:
        writer.record(_entry(3, datetime.now(UTC), n))
        wait_until(lambda: writer.written >= n, timeout=60, interval=0.05)
    finally:
        event.remove(app.state.engine, "before_cursor_execute", count)
        event.remove(app.state.engine, "commit", commit)
    assert writer.written == n and writer.pending() == 0
    # (the commits of other transactions, with no INSERT before them, left out)
    inserts = [k for i, k in enumerate(inserts) if k or (i and inserts[i - 1])]
    # (statements of VALUES_ROWS rows, then of a fifth of it, ... 1: here 4 and 1)
    assert inserts == ([1, 0] if n == 1 else [4, 4, 1, 1, 0] * 4 + [4, 1, 0])
    with app.state.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(PredictionLog)) == n


def _copied_in_batches(app, writer, n: int) -> None:
    """PostgreSQL: each transaction one COPY of at most BATCH_ROWS rows, no INSERT."""
    store, sizes, statements = writer._store, [], []
    writer._store = lambda columns: (sizes.append(len(columns[0])), store(columns))

    def count(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        statements.append(statement)

    event.listen(app.state.engine, "before_cursor_execute", count)
    try:
        writer.record(_entry(3, datetime.now(UTC), n))
        wait_for(lambda: writer.written >= n, timeout=60)
    finally:
        event.remove(app.state.engine, "before_cursor_execute", count)
        del writer._store
    assert sizes == ([1] if n == 1 else [10, 10, 10, 10, 5]) and writer.pending() == 0
    assert not [s for s in statements if "prediction_log" in s], statements
    with app.state.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(PredictionLog)) == n


def test_rows_queued_while_a_chunk_waits_stay_queued(app):
    """A round writes the waiting chunk and leaves the rows queued meanwhile in the queue (they
    are a batch of the next flush): made a chunk of their own, they were left waiting by every
    round, and the thread wrote a few rows a transaction back to back instead of sleeping."""
    writer = _writer(app)
    now = datetime.now(UTC)
    with writer._write_lock:  # (the thread's rounds wait: this test makes them)
        writer.record(_entry(3, now, 2))
        writer._move(everything=False)
        assert [len(chunk[0]) for chunk in writer._memory] == [2]
        writer.record(_entry(3, now, 1, first=2))  # queued while that chunk waits
        writer._round()
        assert writer.written == 2 and not writer._memory and writer._queued_rows == 1
        assert not writer._busy()
    assert writer.flush() == 0 and writer.written == 3


def test_mlflow_invocations_logged_with_default_ids(client, worker, app):
    model = trained_model(client, worker)
    assert client.post("/registered-models", json={"name": "ml"}).status_code == 201
    assert client.post("/registered-models/ml/versions", json={"model_id": model["id"]})
    rows = blobs(n=3, seed=6)[0].tolist()
    r = client.post(
        "/models/ml/invocations", json={"instances": rows}, headers={"X-Request-ID": "v"}
    )
    assert r.status_code == 200, r.text
    assert [p["id"] for p in r.json()["predictions"]] == ["v:0", "v:1", "v:2"]
    logged = _logged(app)
    assert [row.prediction_id for row in logged] == ["v:0", "v:1", "v:2"]
    assert [row.decision for row in logged] == [
        p["decision_value"] for p in r.json()["predictions"]
    ]
    assert {(row.model_id, row.registered_model, row.version) for row in logged} == {
        (model["id"], "ml", 1)
    }


def test_insert_statements_of_five_sizes():
    """Any number of rows goes in statements of VALUES_ROWS, a fifth of it, ... 1 rows: the
    drivers' statement caches hold five statements, not one per remainder."""
    counts = range(1, 1201)
    sizes = [list(prediction_log._chunks(n)) for n in counts]
    assert [sum(s) for s in sizes] == list(counts)
    assert {k for s in sizes for k in s} == {500, 100, 20, 4, 1}
    assert sizes[749 - 1] == [500, 100, 100, 20, 20, 4, 4, 1]
