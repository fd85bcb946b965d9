"""Shadow scoring (PUT/GET/DELETE /registered-models/{name}/shadow): the challenger's answers
to the served rows, compared with predicting the same rows with each version directly."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.orm import ApiKey
from app.main import create_app
from app.monitoring import shadow
from app.monitoring.orm import ShadowPrediction, ShadowRun
from solver.margins import QUANTILE_LEVELS
from tests.app.auth_support import bearer, make_key
from tests.app.shadow_support import (  # (shared with other test modules)
    NAME,
    register,
)
from tests.app.support import assert_problem, blobs, to_csv, trained_model, wait_for

SHADOW = f"/registered-models/{NAME}/shadow"
PROD = f"{NAME}@production"


def two_versions(client: TestClient, worker) -> tuple[int, int]:
    """Version 1 (production) and version 2 (challenger): the same columns and classes, fitted
    on differently drawn data, so that they disagree on borderline rows (uncalibrated: labelled
    by the sign of their decisions; calibrated, both put these rows on the same side)."""
    X, y = blobs(n=80, seed=0)
    v1 = trained_model(client, worker, to_csv(X, y), calibration="none")["id"]
    X2, y2 = blobs(n=80, seed=3, shift=1.5)
    v2 = trained_model(client, worker, to_csv(X2, y2), alpha=1, beta=1, calibration="none")["id"]
    register(client, [v1, v2], {"production": 1, "challenger": 2})
    return v1, v2


def direct(client: TestClient, model_id: int, rows: list) -> tuple[list, np.ndarray, list]:
    """Labels, decision values and clipped flags of predicting ``rows`` with one model by id."""
    r = client.post("/predict", json={"model_id": model_id, "instances": rows})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    decision = np.array([p["decision_value"] for p in preds])
    return [p["label"] for p in preds], decision, [p["clipped"] for p in preds]


def quantiles(values: np.ndarray) -> dict[str, float]:
    return {
        str(q): float(v)
        for q, v in zip(QUANTILE_LEVELS, np.percentile(values, QUANTILE_LEVELS), strict=True)
    }


def predict_ref(client: TestClient, model: str, rows: list, ids: list) -> dict:
    r = client.post("/predict", json={"model": model, "instances": rows, "ids": ids})
    assert r.status_code == 200, r.text
    return r.json()


def serve(client: TestClient, X: np.ndarray, y: np.ndarray, ids: list[str]) -> None:
    """Rows 0-59 served through the production reference (/predict, /predict/file) and the
    default one, a bare name (production, else the newest version: the same at /predict and
    the Open Inference Protocol); a few more through references a shadow does not score."""
    rows = X.tolist()
    predict_ref(client, PROD, rows[:10], ids[:10])
    predict_ref(client, NAME, rows[10:20], ids[10:20])
    v2_body = {
        "inputs": [
            {"name": "input", "datatype": "FP64", "shape": [20, 3], "data": rows[20:40]},
            {"name": "ids", "datatype": "BYTES", "shape": [20], "data": ids[20:40]},
        ]
    }
    r = client.post(f"/v2/models/{NAME}/infer", json=v2_body)
    assert r.status_code == 200, r.text
    files = {"file": ("rows.csv", to_csv(X[40:], y[40:]))}
    form = {"model": PROD, "label": "y", "ids": json.dumps(ids[40:])}
    assert client.post("/predict/file", files=files, data=form).status_code == 200
    # Not the served reference: by version, and by the challenger's alias.
    predict_ref(client, f"{NAME}/1", rows[:5], ["v-0", "v-1", "v-2", "v-3", "v-4"])
    predict_ref(client, f"{NAME}@challenger", rows[:2], ["c-0", "c-1"])


def test_agreement_and_live_statistics_match_direct_predictions(client, worker, engine):
    v1, v2 = two_versions(client, worker)
    r = client.put(SHADOW, json={"alias": "challenger"})
    assert r.status_code == 200, r.text
    started = r.json()
    assert (started["running"], started["n"], started["agreement"]) == (True, 0, None)
    X, y = blobs(n=60, seed=7, shift=2.0)
    X[5, 0] = 1e3  # outside the training range: clipped by both
    X = np.vectorize(lambda v: float(f"{v:.6f}"))(X)  # as the file of rows 40-59 holds them
    ids = [f"row-{i}" for i in range(60)]
    serve(client, X, y, ids)
    direct(client, v1, X[:3].tolist())  # by id: not scored either

    labels1, dec1, clip1 = direct(client, v1, X.tolist())
    labels2, dec2, clip2 = direct(client, v2, X.tolist())
    same = np.array(labels1) == np.array(labels2)
    assert 0 < same.mean() < 1, "the two versions should disagree on some rows"
    report = client.get(SHADOW).json()
    assert report["n"] == 60
    assert report["agreement"] == pytest.approx(float(same.mean()))
    assert report["production"]["model_ids"] == [v1]
    assert report["challenger"]["model_ids"] == [v2]
    for side, dec, clip in (("production", dec1, clip1), ("challenger", dec2, clip2)):
        live = report[side]["live"]
        assert live["n"] == 60
        assert live["quantiles"] == pytest.approx(quantiles(dec), abs=1e-9)
        assert live["clipped_fraction"] == pytest.approx(float(np.mean(clip)))
        assert report[side]["accuracy"] is None
    assert report["labelled"] == 0

    # Feedback on 30 of the rows: both accuracies on them.
    r = client.post("/feedback", json={"model_id": v1, "ids": ids[:30], "labels": y[:30].tolist()})
    assert r.json()["matched"] == 30, r.text
    report = client.get(SHADOW).json()
    assert report["labelled"] == 30
    for side, labels in (("production", labels1), ("challenger", labels2)):
        expected = float(np.mean(np.array(labels[:30]) == y[:30]))
        assert report[side]["accuracy"] == pytest.approx(expected)
    assert_stops(client, engine, report)


def assert_stops(client: TestClient, engine, report: dict) -> None:
    """DELETE stops the scoring at once and keeps the rows; a new PUT starts with none;
    deleting the registered model deletes its shadows."""
    assert client.delete(SHADOW).status_code == 204
    predict_ref(client, PROD, [[0.0, 5.0, 0.0]] * 10, [f"after-{i}" for i in range(10)])
    stopped = client.get(SHADOW).json()
    assert (stopped["running"], stopped["n"]) == (False, report["n"])
    assert stopped["agreement"] == report["agreement"] and stopped["stopped_at"] is not None
    assert_problem(client.delete(SHADOW), 404)
    assert client.put(SHADOW, json={"alias": "challenger"}).json()["n"] == 0
    assert client.delete(SHADOW).status_code == 204
    for alias in ("production", "challenger"):
        assert client.delete(f"/registered-models/{NAME}/aliases/{alias}").status_code == 204
    assert client.delete(f"/registered-models/{NAME}").status_code == 204
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ShadowPrediction)) == 0
        assert session.scalar(select(func.count()).select_from(ShadowRun)) == 0


def test_another_process_scores_and_a_restart_reports(client, worker, settings):
    v1, v2 = two_versions(client, worker)
    X, _ = blobs(n=12, seed=9, shift=2.0)
    rows = X.tolist()
    with TestClient(create_app(settings)) as other:  # its own engine and scorer: a process
        predict_ref(other, PROD, rows[:1], ["warm"])  # its scorer starts, with no shadow
        assert client.put(SHADOW, json={"alias": "challenger"}).status_code == 200
        scorer = shadow.scorer(other.app.state.runtime)
        assert scorer is not shadow.scorer(client.app.state.runtime)
        wait_for(lambda: (predict_ref(other, PROD, rows[:1], ["probe"]), scorer.runs)[1])
        predict_ref(other, PROD, rows, [f"o-{i}" for i in range(12)])
        # written by the other process's thread within its interval (the probes scored, if
        # any, were queued before, so they are written by then too)
        wait_for(lambda: client.get(SHADOW).json()["n"] >= 12, timeout=10)
        assert client.delete(SHADOW).status_code == 204
        n = client.get(SHADOW).json()["n"]
        # The other process stops within its refresh; a row it queued before is not written.
        wait_for(lambda: (predict_ref(other, PROD, rows[:1], ["x"]), not scorer.runs)[1])
        predict_ref(other, PROD, rows, [f"late-{i}" for i in range(12)])
        # flush() scores and writes every queued row now (after any batch the thread is
        # writing): a late row queued by the other process would be written by its return.
        scorer.flush()
        assert scorer.pending() == 0
        assert client.get(SHADOW).json()["n"] == n
    labels1, *_ = direct(client, v1, rows)
    labels2, *_ = direct(client, v2, rows)
    with TestClient(create_app(settings)) as restarted:
        report = restarted.get(SHADOW).json()
    assert report["n"] == n and report["running"] is False
    # Every scored row is one of the 12 (or the probes, all row 0): agreement from those.
    same = np.array(labels1) == np.array(labels2)
    expected = (same[0] * (n - 12) + same.sum()) / n
    assert report["agreement"] == pytest.approx(float(expected))


def test_a_new_process_shadows_its_first_request(client, worker, settings):
    """A process started while a shadow runs scores its very first served rows (it read the
    running shadows before them; its thread's first round came after the request before)."""
    two_versions(client, worker)
    assert client.put(SHADOW, json={"alias": "challenger"}).status_code == 200
    X, _ = blobs(n=12, seed=9, shift=2.0)
    with TestClient(create_app(settings)) as started:
        predict_ref(started, PROD, X.tolist(), [f"first-{i}" for i in range(12)])
        shadow.scorer(started.app.state.runtime).flush()
    assert client.get(SHADOW).json()["n"] == 12


def test_refused_shadows(client, worker):
    assert_problem(client.put(SHADOW, json={"alias": "challenger"}), 404)
    assert_problem(client.get(SHADOW), 404)
    X, y = blobs(n=60, seed=0)
    v1 = trained_model(client, worker, to_csv(X, y))["id"]
    v2 = trained_model(client, worker, to_csv(X, y), alpha=1)["id"]
    other_classes = trained_model(client, worker, to_csv(X, np.where(y == "pos", "b", "a")))["id"]
    names = ["a0", "a1", "a2"]
    other_features = trained_model(client, worker, to_csv(X, y, names=names))["id"]
    register(
        client,
        [v1, v2, other_classes, other_features],
        {"production": 1, "same": 1, "classes": 3, "features": 4, "ok": 2},
    )
    assert_problem(client.get(SHADOW), 404)  # none started yet
    assert_problem(client.delete(SHADOW), 404)
    assert_problem(client.put(SHADOW, json={"alias": "nope"}), 404, "alias")
    assert_problem(client.put(SHADOW, json={"alias": "production"}), 422, "alias")
    body = assert_problem(client.put(SHADOW, json={"alias": "same"}), 422, "alias")
    assert "version 1" in body["detail"]
    body = assert_problem(client.put(SHADOW, json={"alias": "classes"}), 422, "alias")
    assert "classes differ" in body["detail"]
    body = assert_problem(client.put(SHADOW, json={"alias": "features"}), 422, "alias")
    assert "features differ" in body["detail"]
    assert_problem(client.put(SHADOW, json={"alias": "bad alias!"}), 422, "alias")
    assert_problem(client.put(SHADOW, json={}), 422, "alias")
    assert_problem(client.put(SHADOW, json={"alias": "ok", "x": 1}), 422)
    assert_problem(client.put("/registered-models/nobody/shadow", json={"alias": "ok"}), 404)
    # Nothing was started by the refusals; a valid one starts; PUT again keeps it.
    assert_problem(client.get(SHADOW), 404)
    first = client.put(SHADOW, json={"alias": "ok"}).json()
    assert client.put(SHADOW, json={"alias": "ok"}).json()["started_at"] == first["started_at"]
    # production moved onto the challenger's version: its rows are not scored (same model)
    r = client.put(f"/registered-models/{NAME}/aliases/production", json={"version": 2})
    assert r.status_code == 200
    shadow.scorer(client.app.state.runtime).refresh()
    predict_ref(client, PROD, X[:4].tolist(), ["s0", "s1", "s2", "s3"])
    assert client.get(SHADOW).json()["n"] == 0


def test_shadow_routes_need_their_scopes(settings, engine, client, worker):
    two_versions(client, worker)
    keyed = settings.model_copy(update={"admin_key": SecretStr("admin-" + "k" * 40)})
    read, write = make_key(engine, "read"), make_key(engine, "write")
    try:
        with TestClient(create_app(keyed)) as c:
            for method in ("GET", "PUT", "DELETE"):
                assert_problem(c.request(method, SHADOW, json={"alias": "challenger"}), 401)
            assert_problem(c.put(SHADOW, json={"alias": "challenger"}, headers=bearer(read)), 403)
            assert_problem(c.delete(SHADOW, headers=bearer(read)), 403)
            assert_problem(c.get(SHADOW, headers=bearer(read)), 404)  # allowed: none yet
            r = c.put(SHADOW, json={"alias": "challenger"}, headers=bearer(write))
            assert r.status_code == 200, r.text
            assert c.get(SHADOW, headers=bearer(read)).json()["running"] is True
            assert c.delete(SHADOW, headers=bearer(write)).status_code == 204
    finally:  # the keys would close the next module's service (auth "auto")
        with engine.begin() as conn:
            conn.execute(ApiKey.__table__.delete())
