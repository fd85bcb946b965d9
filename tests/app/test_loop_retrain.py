"""Retraining jobs (issue 48): POST /registered-models/{name}/retrain fits the parent's
training rows plus the fed-back logged rows (their logged inputs, one per prediction id),
warm-started from the parent, measured against a cold fit of the same rows, and registers the
fit as the next version with its lineage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.monitoring.orm import PredictionInput
from app.registry.orm import ModelVersion
from tests.app.auth_support import bearer, make_key
from tests.app.loop_support import NAME, feedback, flush, predict, registered_linear
from tests.app.support import assert_problem, blobs, run_jobs

pytestmark = pytest.mark.postgres

RETRAIN = f"/registered-models/{NAME}/retrain"


def _fed_back(client, n: int = 60, seed: int = 7) -> tuple[np.ndarray, list[str], np.ndarray]:
    """n shifted rows predicted through NAME with ids and fed back their true labels; one id
    is fed back twice (a second prediction of it), so n distinct fed-back ids."""
    X, y = blobs(n=n, seed=seed, shift=2.0)
    X = X + 0.7  # the shift: live rows move
    ids = [f"row-{i}" for i in range(n)]
    predict(client, X, ids)
    predict(client, X[:1], ids[:1])  # the same id logged twice: one row
    feedback(client, ids, y.tolist())
    return X, ids, y


def test_retrain_adds_the_fed_back_rows_warm_started(client, worker, engine):
    registered_linear(client, worker)
    X, ids, y = _fed_back(client)
    with Session(engine) as session:  # the logged inputs are the rows sent, as float64
        stored = {r.prediction_id: np.frombuffer(r.row, "<f8") for r in
                  session.scalars(select(PredictionInput).order_by(PredictionInput.id))}
    assert np.allclose(np.vstack([stored[i] for i in ids]), X, atol=1e-12)
    r = client.post(RETRAIN, json={"alias": "production"})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/jobs/{r.json()['id']}"
    assert run_jobs(worker) == ["succeeded"], client.get(r.headers["location"]).json()
    job = client.get(r.headers["location"]).json()
    lineage = job["result"]["lineage"]
    assert (lineage["parent_version"], lineage["dataset_rows"]) == (1, 200)
    assert lineage["feedback_rows"] == 60  # one per prediction id
    saving = lineage["warm_start"]
    assert saving["applied"] == "linear"
    warm, cold = saving["warm"], saving["cold"]
    # the figures are the two fits' own (how much a warm start saves is the library's: bench/)
    assert saving["iterations_saved"] == cold["n_iter"] - warm["n_iter"]
    assert saving["speedup"] == pytest.approx(cold["fit_seconds"] / warm["fit_seconds"])
    # the same convex problem from two starts: the same model, within the stopping rule
    assert abs(warm["holdout_accuracy"] - cold["holdout_accuracy"]) <= 0.02
    detail = client.get(f"/registered-models/{NAME}").json()
    newest = detail["versions"][0]
    assert newest["version"] == 2 and newest["lineage"]["feedback_rows"] == 60
    assert detail["versions"][1]["lineage"] is None
    model = client.get(f"/models/{newest['model_id']}").json()
    assert model["n_train"] + model["n_test"] == 260


def test_a_window_leaves_out_older_feedback(client, worker, engine):
    registered_linear(client, worker)
    _, ids, _ = _fed_back(client)
    with Session(engine) as session:  # half the rows logged two days ago (and registered after)
        old = datetime.now(UTC) - timedelta(days=2)
        session.execute(update(PredictionInput).where(
            PredictionInput.prediction_id.in_(ids[:20])).values(created_at=old))
        session.execute(update(ModelVersion).values(created_at=old - timedelta(days=1)))
        session.commit()
    r = client.post(RETRAIN, json={"window_seconds": 86400, "include_dataset": False,
                                   "compare_cold": False})
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    lineage = client.get(f"/jobs/{r.json()['id']}").json()["result"]["lineage"]
    assert lineage["dataset_rows"] == 0 and lineage["feedback_rows"] == 40
    assert lineage["warm_start"]["cold"] is None
    r = client.post(RETRAIN, json={"compare_cold": False})  # no window: all of them
    assert run_jobs(worker) == ["succeeded"]
    assert client.get(f"/jobs/{r.json()['id']}").json()["result"]["lineage"][
        "feedback_rows"] == 60


def test_a_retrain_of_a_retrained_version_keeps_its_feedback(client, worker):
    registered_linear(client, worker)
    _fed_back(client)
    client.post(RETRAIN, json={"compare_cold": False})
    assert run_jobs(worker) == ["succeeded"]
    r = client.post(RETRAIN, json={"version": 2, "compare_cold": False})
    assert r.status_code == 202
    assert run_jobs(worker) == ["succeeded"]
    lineage = client.get(f"/jobs/{r.json()['id']}").json()["result"]["lineage"]
    assert lineage["parent_version"] == 2 and lineage["feedback_rows"] == 60


def test_retrain_with_a_search(client, worker):
    registered_linear(client, worker)
    _fed_back(client, n=40)
    r = client.post(RETRAIN, json={"search": "quick", "compare_cold": False})
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    lineage = client.get(f"/jobs/{r.json()['id']}").json()["result"]["lineage"]
    assert lineage["warm_start"]["applied"] == "off" and lineage["search"]["grid"] == "quick"


@pytest.mark.parametrize(("body", "field"), [
    ({"alias": "nope"}, "alias"),
    ({"alias": "production", "version": 1}, "alias"),
    ({"version": 9}, "version"),
    ({"window_seconds": 0}, "window_seconds"),
    ({"search": "bogus"}, None),
    ({"warm_start": "yes"}, "warm_start"),
    ({"extra": 1}, "extra"),
])
def test_retrain_refuses_bad_bodies(client, worker, body, field):
    registered_linear(client, worker)
    assert_problem(client.post(RETRAIN, json=body), 422, field)


def test_retrain_of_an_unknown_model_is_404(client):
    assert client.post("/registered-models/ghost/retrain", json={}).status_code == 404


def test_retrain_and_policy_routes_need_their_scopes(keyed, engine):
    read, write = make_key(engine, "read"), make_key(engine, "write")
    for path, method in ((RETRAIN, "post"), (f"/registered-models/{NAME}/policy", "put"),
                         (f"/registered-models/{NAME}/policy", "delete")):
        assert keyed.request(method, path, json={}).status_code == 401
        assert keyed.request(method, path, json={}, headers=bearer(read)).status_code == 403
        # a write key passes the gate: the registered model does not exist
        assert keyed.request(method, path, json={}, headers=bearer(write)).status_code == 404
    path = f"/registered-models/{NAME}/policy"
    assert keyed.get(path).status_code == 401
    assert keyed.get(path, headers=bearer(read)).status_code == 404


def test_inputs_are_not_kept_for_a_model_by_id(client, worker, engine):
    job = registered_linear(client, worker)
    X, _ = blobs(n=5, seed=1)
    r = client.post("/predict", json={"model_id": job["model_id"], "instances": X.tolist()})
    assert r.status_code == 200
    flush(client)
    with Session(engine) as session:
        assert session.scalars(select(PredictionInput)).first() is None
