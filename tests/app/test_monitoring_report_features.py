"""Per-feature drift in GET /models/{id}/monitoring: the live rows' scaled features are counted
by the log's writer (not the request) into feature_counts; training-like traffic flags no
feature, a shifted feature is flagged and named first; the statistic and p-value equal
scipy's two-sample KS on the binned values, computed here from the rows sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import ks_2samp
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.runtime import Runtime
from app.monitoring import feature_drift
from app.monitoring import log as prediction_log
from app.monitoring.orm import FeatureCounts
from tests.app.support import blobs, to_csv, trained_model

D = 5
NAMES = [f"x{j}" for j in range(D)]


def _bins(Xs: np.ndarray) -> np.ndarray:
    """Bin index of each scaled value, by comparison with the bin edges (np.digitize)."""
    edges = np.linspace(0.0, 1.0, feature_drift.BINS + 1)[1:-1]
    return np.digitize(np.clip(Xs, 0.0, 1.0), edges)


def _report(client, model_id, **params):
    r = client.get(f"/models/{model_id}/monitoring", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def _predict(client, model_id, X):
    r = client.post("/predict", json={"model_id": model_id, "instances": X.tolist()})
    assert r.status_code == 200, r.text


def test_bin_counts_dense_and_sparse_equal_a_histogram():
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.2, 1.2, size=(3000, 7))
    X[::5, 2] = 0.0
    X[::7, 4] = 1.0
    expected = np.array([np.bincount(_bins(X[:, j]), minlength=20) for j in range(7)])
    got = feature_drift.bin_counts(X)
    assert got.shape == (7, 20) and (got == expected).all()
    S = np.where(rng.random(X.shape) < 0.7, 0.0, np.clip(X, 0, 1))
    dense = feature_drift.bin_counts(S)
    assert (feature_drift.bin_counts(sp.csr_matrix(S)) == dense).all()
    assert dense.sum() == S.size


def test_compare_equals_ks_2samp_on_the_binned_values():
    rng = np.random.default_rng(1)
    ref = rng.uniform(size=(400, 3))
    live = rng.uniform(size=(250, 3))
    live[:, 1] = np.clip(live[:, 1] + 0.3, 0, 1)
    out = feature_drift.compare(
        feature_drift.bin_counts(ref), feature_drift.bin_counts(live), 250, ["a", "b", "c"]
    )
    assert out["features"][0]["name"] == "b" and out["features"][0]["drifted"]
    assert out["threshold"] == pytest.approx(0.01 / 3) and out["drifted_count"] == 1
    for f in out["features"]:
        j = "abc".index(f["name"])
        want = ks_2samp(_bins(ref[:, j]), _bins(live[:, j]), method="asymp")
        assert f["statistic"] == pytest.approx(want.statistic, abs=1e-12)
        assert f["p_value"] == pytest.approx(want.pvalue, rel=1e-9, abs=1e-300)
        assert f["drifted"] == (want.pvalue < 0.01 / 3)


def test_training_like_traffic_is_not_flagged_a_shifted_feature_is(client, worker, engine):
    X, y = blobs(n=300, d=D, seed=4)
    # the reference is the training part: every row, so no hold-out (the default keeps 20 %)
    model = trained_model(client, worker, content=to_csv(X, y), test_fraction=None)
    lo, hi = X.min(axis=0), X.max(axis=0)
    like, _ = blobs(n=400, d=D, seed=5)
    _predict(client, model["id"], like)
    rep = _report(client, model["id"])
    per = rep["drift"]["per_feature"]
    assert per["n_live"] == 400 and per["n_reference"] == 300 and per["n_features"] == D
    assert per["drifted_count"] == 0 and per["skipped"] is None
    assert {f["name"] for f in per["features"]} == set(NAMES)
    # statistic and p-value: independently, from the rows sent and the training rows
    ref_bins, live_bins = _bins((X - lo) / (hi - lo)), _bins((like - lo) / (hi - lo))
    for f in per["features"]:
        j = NAMES.index(f["name"])
        want = ks_2samp(ref_bins[:, j], live_bins[:, j], method="asymp")
        assert f["statistic"] == pytest.approx(want.statistic, abs=1e-12)
        assert f["p_value"] == pytest.approx(want.pvalue, rel=1e-9)
    # the counts are in the table, one row per minute and write: every row sent, once
    with Session(engine) as session:
        assert session.scalar(select(func.sum(FeatureCounts.n_rows))) == 400
    shifted = blobs(n=400, d=D, seed=6)[0]
    shifted[:, 3] += 1.5  # a noise feature: the decision values barely move
    _predict(client, model["id"], shifted)
    per = _report(client, model["id"])["drift"]["per_feature"]
    assert per["n_live"] == 800
    assert per["features"][0]["name"] == "x3" and per["features"][0]["drifted"] is True
    assert per["drifted_count"] == 1
    stats = [f["statistic"] for f in per["features"]]
    assert stats == sorted(stats, reverse=True)


def test_window_and_skips(client, worker):
    model = trained_model(client, worker)
    _predict(client, model["id"], blobs(n=30, seed=2)[0])
    later = (datetime.now(UTC) + timedelta(minutes=2)).isoformat()
    per = _report(client, model["id"])["drift"]["per_feature"]
    assert per["n_live"] == 30
    # a window after the traffic's minute: no live rows (nor drift)
    assert _report(client, model["id"], since=later)["drift"] is None
    # until the traffic's minute began: no counts in the window, said so
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    per = _report(client, model["id"], until=start.isoformat())
    assert per["live"]["n"] == 0
    unscaled = trained_model(client, worker, scaling="none")
    _predict(client, unscaled["id"], blobs(n=10, seed=2)[0])
    per = _report(client, unscaled["id"])["drift"]["per_feature"]
    assert per["skipped"] == "the model was trained without min-max scaling (scaling: none)"
    assert per["features"] == [] and per["drifted_count"] is None


def test_wide_models_are_skipped_and_say_why():
    assert feature_drift.skip_reason(1000, True) is None
    reason = feature_drift.skip_reason(1001, True)
    assert reason == "1001 features: per-feature drift is kept for at most 1000"
    entry = (1, None, None, None, datetime.now(UTC), [0], None, None, None, np.zeros((1, 1001)))
    assert feature_drift.admit(object(), entry)[9] is None  # never queued with the row


def test_queue_budget_drops_features_not_rows(settings, engine, monkeypatch):
    writer = prediction_log.PredictionLogWriter(Runtime(engine, settings))
    monkeypatch.setattr(feature_drift, "QUEUE_CELLS", 10)
    now = datetime.now(UTC)

    def entry(n):
        z = np.zeros(n)
        return (1, None, None, None, now, list(range(n)), z, z.astype(int), z > 0, np.ones((n, 2)))

    assert writer.record(entry(4)) and writer.record(entry(1))  # 8 + 2: 10 of 10 values
    assert writer.record(entry(1))  # 12 > 10: the row is queued, its features are not
    state = feature_drift.state(writer)
    assert state.dropped_rows == 1
    writer.flush()
    assert state.cells == 0 and writer.written == 6
    feature_drift.write(writer, force=True)
    with Session(engine) as session:
        row = session.scalars(select(FeatureCounts)).one()
    counts = np.frombuffer(row.counts, dtype="<u4").reshape(2, 20)
    assert row.n_rows == 5 and counts[:, 19].tolist() == [5, 5] and counts.sum() == 10
    writer.close()


def test_counts_older_than_the_retention_are_deleted(settings, engine):
    old = datetime.now(UTC) - timedelta(days=settings.prediction_log_days + 1)
    blob = np.zeros((1, 20), dtype="<u4").tobytes()
    with Session(engine) as session:
        for minute in (old, datetime.now(UTC)):
            session.add(FeatureCounts(model_id=1, minute=minute, n_rows=0, n_features=1,
                                      bins=20, counts=blob))  # fmt: skip
        session.commit()
    runtime = Runtime(engine, settings)
    writer = prediction_log.PredictionLogWriter(runtime)
    feature_drift.write(writer)  # the first write applies the retention
    with Session(engine) as session:
        left = session.scalars(select(FeatureCounts.minute)).all()
    assert len(left) == 1 and left[0] > old + timedelta(days=1)


def test_window_is_taken_to_the_minute(engine):
    t0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    t1 = t0 + timedelta(minutes=5)
    with Session(engine) as session:
        for minute, n in ((t0, 3), (t1, 4)):
            counts = np.zeros((2, 20), dtype="<u4")
            counts[:, n] = n
            session.add(FeatureCounts(model_id=7, minute=minute, n_rows=n, n_features=2,
                                      bins=20, counts=counts.tobytes()))  # fmt: skip
        session.add(FeatureCounts(model_id=8, minute=t1, n_rows=9, n_features=2, bins=20,
                                  counts=np.ones((2, 20), dtype="<u4").tobytes()))  # fmt: skip
        session.commit()
        n, counts = feature_drift.live_counts(session, 7, 2, None, None)
        assert n == 7 and counts[0, 3] == 3 and counts[0, 4] == 4 and counts.sum() == 14
        # since inside t1's minute: rounded down, t1 counts; until t1: t1 does not
        n, counts = feature_drift.live_counts(session, 7, 2, t1 + timedelta(seconds=30), None)
        assert n == 4 and counts[1, 4] == 4
        assert feature_drift.live_counts(session, 7, 2, None, t1)[0] == 3
        naive = (t1 + timedelta(seconds=30)).replace(tzinfo=None)  # naive: UTC
        assert feature_drift.live_counts(session, 7, 2, naive, None)[0] == 4
    out = feature_drift.compare(np.ones((2, 20)), np.zeros((2, 20)), 0, ["a", "b"])
    assert out["skipped"] == "no live feature counts" and out["features"] == []
