"""Issue 28, points 2 and 3: the prediction log is a durable record and reads never wait for its
writer (both databases).

* a write the database refuses (here: the table renamed away, a real fault of the database) is
  retried with backoff, never dropped; /metrics shows the rows waiting and the failures;
* beyond memory the waiting rows go to the spool file (JSON lines, no pickle), which outlives
  the process: the next app on the same database adopts and writes them;
* beyond the spool's bound rows are dropped, counted in msvmav_prediction_log_dropped_total and
  logged once;
* feedback, the monitoring report and the shadow report answer while the writer is blocked
  (an event, not a timing), saying how many rows were pending;
* the retention runs while the writer is blocked (its own clock).
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from app.main import create_app
from app.monitoring import feature_drift
from app.monitoring import log as prediction_log
from app.monitoring.orm import PredictionLog
from tests.app.shadow_support import register
from tests.app.support import blobs, to_csv, trained_model, wait_for


def _writer(app) -> prediction_log.PredictionLogWriter:
    found = prediction_log.writer(app.state.runtime)
    assert found is not None
    return found


def _metrics(client) -> dict[str, float]:
    out = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("msvmav_prediction_log_") and " " in line:
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def _waiting(client) -> float:
    got = _metrics(client)
    return got.get("msvmav_prediction_log_spool_rows", 0) + got.get(
        "msvmav_prediction_log_queue_rows", 0
    )


def _count(engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(PredictionLog))


@contextmanager
def _table_away(engine):
    """The prediction_log table renamed while the block runs: every write to it fails in the
    database (no mock), as when the database is away; renamed back afterwards."""
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE prediction_log RENAME TO prediction_log_away"))
    try:
        yield
    finally:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE prediction_log_away RENAME TO prediction_log"))


def _predict(client, model_id: int, n: int, tag: str) -> None:
    X, _ = blobs(n=n, seed=len(tag))
    ids = [f"{tag}-{i}" for i in range(n)]
    r = client.post("/predict", json={"model_id": model_id, "instances": X.tolist(), "ids": ids})
    assert r.status_code == 200, r.text


def test_refused_writes_are_retried_not_lost(client, worker, app, engine, monkeypatch):
    monkeypatch.setattr(prediction_log, "RETRY_MAX", 0.2, raising=False)
    model = trained_model(client, worker)
    writer = _writer(app)
    with _table_away(engine):
        for k in range(3):
            _predict(client, model["id"], 7, f"r{k}")
        wait_for(lambda: _metrics(client).get("msvmav_prediction_log_write_failures_total", 0) >= 2)
        got = _metrics(client)
        assert got["msvmav_prediction_log_pending_rows"] == 21
        assert got["msvmav_prediction_log_dropped_total"] == 0
    assert writer.flush(timeout=60) == 0
    assert _count(engine) == 21 and writer.dropped == 0
    got = _metrics(client)
    assert got["msvmav_prediction_log_written_total"] == 21
    assert got["msvmav_prediction_log_pending_rows"] == 0


def test_spool_file_outlives_the_process(settings, engine, worker, tmp_path, monkeypatch):
    # one request in memory, then the file
    monkeypatch.setattr(prediction_log, "MEMORY_ROWS", 4, raising=False)
    monkeypatch.setattr(prediction_log, "RETRY_MAX", 0.2, raising=False)
    monkeypatch.setattr(prediction_log, "CLOSE_SECONDS", 0.3, raising=False)
    spooled = settings.model_copy(update={"prediction_log_spool_dir": str(tmp_path / "spool")})
    app = create_app(spooled)
    with TestClient(app) as client:
        model = trained_model(client, worker)
        with _table_away(engine):
            for k in range(4):
                _predict(client, model["id"], 4, f"s{k}")
            # taken off the queue, into memory (MEMORY_ROWS) and the file
            wait_for(lambda: _metrics(client)["msvmav_prediction_log_spool_rows"] >= 12)
            assert _waiting(client) == 16
            client.__exit__(None, None, None)  # the app's shutdown, the database still refusing
            files = list((tmp_path / "spool").glob("prediction-log-*.jsonl"))
            assert len(files) == 1
            lines = [json.loads(line) for line in files[0].read_bytes().splitlines()]
            assert sum(len(columns[0]) for columns in lines) == 16  # memory's rows too
            assert all(len(columns) == 10 for columns in lines)
            assert sorted(i for columns in lines for i in columns[4]) == sorted(
                f"s{k}-{i}" for k in range(4) for i in range(4)
            )
    assert _count(engine) == 0
    again = create_app(spooled)  # the next process on the same database adopts the file
    with TestClient(again):
        writer = _writer(again)
        writer._wake.set()
        wait_for(lambda: _count(engine) == 16, timeout=60)
    assert not list((tmp_path / "spool").glob("prediction-log-*.jsonl"))
    with engine.connect() as conn:
        ids = conn.scalars(select(PredictionLog.prediction_id)).all()
    assert sorted(ids) == sorted(f"s{k}-{i}" for k in range(4) for i in range(4))


def test_beyond_the_bound_rows_are_dropped_counted_and_logged_once(
    settings, engine, worker, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(prediction_log, "MEMORY_ROWS", 4, raising=False)
    monkeypatch.setattr(prediction_log, "RETRY_MAX", 0.2, raising=False)
    bounded = settings.model_copy(
        update={"prediction_log_spool_dir": str(tmp_path), "prediction_log_spool_mb": 0}
    )
    app = create_app(bounded)
    with TestClient(app) as client, caplog.at_level(logging.WARNING, "app.monitoring.log"):
        model = trained_model(client, worker)
        with _table_away(engine):
            _predict(client, model["id"], 4, "d0")  # held in memory (MEMORY_ROWS)
            wait_for(lambda: _metrics(client)["msvmav_prediction_log_write_failures_total"])
            for k in (1, 2):  # no room in memory, none in the spool file: dropped
                _predict(client, model["id"], 4, f"d{k}")
            wait_for(lambda: _metrics(client)["msvmav_prediction_log_dropped_total"] == 8)
            assert _metrics(client)["msvmav_prediction_log_pending_rows"] == 4
        assert _writer(app).flush(timeout=60) == 0
        assert _count(engine) == 4
    dropped = [r for r in caplog.records if "rows dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in caplog.records]


def _stall(monkeypatch) -> tuple[threading.Event, threading.Event, threading.Event]:
    """The log writer's thread made to stop inside its round (feature_drift.record, which it
    calls while holding its write lock, as each batch leaves the queue) until ``release``;
    ``gave_up`` when it was never released (a read waited for it)."""
    blocked, release, gave_up = threading.Event(), threading.Event(), threading.Event()
    original = feature_drift.record

    def stalled(writer, batch):  # noqa: ANN001
        blocked.set()
        if not release.wait(30):
            gave_up.set()
        original(writer, batch)

    monkeypatch.setattr(feature_drift, "record", stalled)
    return blocked, release, gave_up


def test_reads_answer_while_the_writer_is_blocked(client, worker, app, monkeypatch):
    X, y = blobs(n=80, seed=0)
    v1 = trained_model(client, worker, to_csv(X, y))["id"]
    v2 = trained_model(client, worker, to_csv(*blobs(n=80, seed=3, shift=1.5)), alpha=1)["id"]
    register(client, [v1, v2], {"production": 1, "challenger": 2})
    assert client.put("/registered-models/credit/shadow", json={"alias": "challenger"})
    blocked, release, gave_up = _stall(monkeypatch)
    ids = [f"b-{i}" for i in range(5)]
    try:
        r = client.post("/predict", json={"model": "credit@production", "instances": X[:5].tolist(),
                                          "ids": ids})  # fmt: skip
        assert r.status_code == 200, r.text
        assert blocked.wait(30)  # the writer took the rows and is stuck
        labels = ["neg"] * 5
        fb = client.post("/feedback", json={"model_id": v1, "ids": ids, "labels": labels})
        report = client.get(f"/models/{v1}/monitoring")
        shadow = client.get("/registered-models/credit/shadow")
        assert not gave_up.is_set() and not release.is_set()  # answered, the writer still stuck
    finally:
        release.set()
    assert fb.status_code == 200 and report.status_code == 200 and shadow.status_code == 200
    assert fb.json()["matched"] == 0 and fb.json()["log"]["pending_rows"] == 5
    assert report.json()["live"]["n"] == 0 and report.json()["log"]["pending_rows"] == 5
    assert shadow.json()["log"]["pending_rows"] == 5
    # Once the writer goes on, the same reads find the rows.
    wait_for(lambda: _writer(app).pending() == 0)
    fb = client.post("/feedback", json={"model_id": v1, "ids": ids, "labels": labels})
    assert fb.json()["matched"] == 5 and fb.json()["log"]["pending_rows"] == 0
    assert client.get(f"/models/{v1}/monitoring").json()["live"]["n"] == 5


def test_retention_runs_while_the_writer_is_blocked(client, worker, app, engine, monkeypatch):
    model = trained_model(client, worker)
    writer = _writer(app)
    old = datetime.now(UTC) - timedelta(days=writer.days + 1)
    writer.record((model["id"], None, None, None, old, ["old"], *_scores(1)))
    writer.flush()
    assert _count(engine) == 1
    blocked, release, _ = _stall(monkeypatch)
    try:
        _predict(client, model["id"], 3, "new")
        assert blocked.wait(30)
        writer._retention_wake.set()  # (its clock: RETENTION_SECONDS, or a tenth of max_rows)
        wait_for(lambda: _count(engine) == 0, timeout=30)
    finally:
        release.set()
    assert writer.flush(timeout=60) == 0 and _count(engine) == 3


def _scores(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = np.linspace(-1, 1, n)
    return s, (s > 0).astype(int), np.zeros(n, dtype=bool)


@pytest.fixture(autouse=True)
def _own_spool(tmp_path, monkeypatch):
    """Every writer of these tests spools under the test's own folder."""

    def directory(settings, engine) -> Path:  # noqa: ANN001
        return Path(settings.prediction_log_spool_dir or tmp_path / "default-spool")

    monkeypatch.setattr(prediction_log, "spool_directory", directory, raising=False)


def test_a_row_the_database_cannot_store_is_dropped_alone(app, engine, caplog):
    """A chunk refused for its contents is split until the row is found: only that row is
    dropped (counted); the others are written. PostgreSQL refuses a NUL in text; SQLite stores
    it (and the rule at the door refuses it in requests: docs/hardening.md)."""
    writer = _writer(app)
    if writer.sqlite:
        pytest.skip("SQLite stores a NUL in text")
    now = datetime.now(UTC)
    ids = [f"n-{i}" for i in range(9)]
    ids[5] = "bad\x00id"
    writer.record((1, None, None, None, now, ids, *_scores(9)))
    with caplog.at_level(logging.WARNING, "app.monitoring.log"):
        assert writer.flush(timeout=60) == 0
    with engine.connect() as conn:
        logged = conn.scalars(select(PredictionLog.prediction_id)).all()
    assert sorted(logged) == sorted(i for i in ids if "\x00" not in i)
    assert writer.dropped == 1
    assert any("cannot store" in r.getMessage() for r in caplog.records)
