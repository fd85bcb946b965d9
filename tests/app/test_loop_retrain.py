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
from tests.app.support import assert_problem, blobs, run_jobs, to_csv, upload

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


@pytest.mark.parametrize("by", ["model_id", "model"])
def test_inputs_are_not_kept_for_a_model_by_id(client, worker, engine, by):
    """By ``model_id``, or by ``model`` naming the id ("3": a reference resolved to no
    registered model; its inputs were queued with no name, and the writer's flush failed on
    the NOT NULL column)."""
    job = registered_linear(client, worker)
    X, _ = blobs(n=5, seed=1)
    ref = job["model_id"] if by == "model_id" else str(job["model_id"])
    r = client.post("/predict", json={by: ref, "instances": X.tolist()})
    assert r.status_code == 200
    flush(client)
    with Session(engine) as session:
        assert session.scalars(select(PredictionInput)).first() is None


def _registered_rbf(client, worker) -> dict:
    """Version 1 of NAME (production): exact-kernel RBF MSVMAv, calibration none, with a
    hold-out."""
    X, y = blobs(n=200, seed=0, shift=2.0)
    ds = upload(client, to_csv(X, y))
    r = client.post("/train", json={"dataset_id": ds["id"], "kernel": "rbf", "alpha": 1,
                                    "beta": 0.25, "calibration": "none", "max_iter": 200,
                                    "test_fraction": 0.25, "seed": 3, "register_as": NAME})
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    r = client.put(f"/registered-models/{NAME}/aliases/production", json={"version": 1})
    assert r.status_code == 200, r.text
    return client.get(f"/registered-models/{NAME}").json()


def _library_update(engine, name: str, parent_id: int, child_id: int, kept: bool):
    """The parent's ``MSVMAv.update_fit`` computed here from the stored rows: its dataset's
    training rows (its hold-out left out), less those the child holds out, plus the child's
    other training rows, in the parent's scaling (kernel) or the child's (linear: the
    parent's solution carried); returns (the update's decisions, the child's) on every
    fed-back row, and the updated estimator."""
    from app.datasets import service as datasets
    from app.models import service as models
    from app.monitoring import inputs
    from app.training.warm import carry_linear

    with Session(engine) as session:
        parent, child = models.get(session, parent_id), models.get(session, child_id)
        est, scaling = models.load_estimator(session, parent)
        child_est, child_scaling = models.load_estimator(session, child)
        X0, y0 = datasets.load_arrays(session, datasets.get(session, parent.dataset_id))
        fed = inputs.feedback_rows(session, name, parent.n_features, None, None)
        held = set(parent.summary["holdout"]["rows"])
        child_held = set(child.summary["holdout"]["rows"])
    n0 = len(y0)
    train0 = [i for i in range(n0) if i not in held]
    y = np.asarray(y0.tolist() + fed.labels.tolist())
    X = np.vstack([np.asarray(X0, dtype=np.float64), fed.X])
    remove = [k for k, i in enumerate(train0) if i in child_held]
    assert child_held >= held or not kept  # "parent": its hold-out stays held out
    added = [i for i in range(len(y)) if i not in child_held and i not in set(train0)]
    kernel = est.kernel != "linear"
    if not kernel:
        carry_linear(est, scaling, child_scaling)
        scaling = child_scaling
    else:
        assert child_scaling.data_min.tolist() == scaling.data_min.tolist()
    # the parent's rows unclipped (those removed may lie outside the new range); the added
    # ones clipped, as the training part is (a kernel parent's range is its own)
    est.update_fit((scaling.transform(X[train0], clip=False), y[train0]),
                   add=(scaling.transform(X[added]), y[added]), remove=remove, warm_folds=True)
    rows = child_scaling.transform(fed.X)
    return est.decision_function(rows), child_est.decision_function(rows), est


@pytest.mark.parametrize(("kernel", "split"), [("rbf", "fresh"), ("linear", "fresh"),
                                              ("rbf", "parent"), ("linear", "parent")])
def test_a_retrain_is_the_libraries_update_of_the_parent(client, worker, engine, kernel,
                                                         split):
    """Linear and kernel parents alike: the warm fit is ``MSVMAv.update_fit`` of the parent's
    training rows, less those the retrain holds out (removed), plus its other training rows
    (equal decisions), and the lineage says what the update reused and saved. ``split:
    "parent"``: the parent's hold-out stays held out and the update only adds rows."""
    if kernel == "rbf":
        _registered_rbf(client, worker)
    else:
        registered_linear(client, worker)
    _fed_back(client)
    r = client.post(RETRAIN, json={"alias": "production", "split": split})
    assert run_jobs(worker) == ["succeeded"], client.get(r.headers["location"]).json()
    job = client.get(r.headers["location"]).json()
    lineage = job["result"]["lineage"]
    saving = lineage["warm_start"]
    assert saving["split"] == split
    assert saving["applied"] == ("kernel" if kernel == "rbf" else "linear")
    update = saving["update"]
    assert update["used"] is True and update["start"] == "parent", update
    assert (update["rows_removed"] > 0) == (split == "fresh") and update["rows_added"] > 30
    if kernel == "rbf":
        assert "kernel width gamma_" in update["reused"]
    assert "update_fit" in job["message"]
    parent_id = client.get(f"/registered-models/{NAME}").json()["versions"][1]["model_id"]
    ours, theirs, est = _library_update(engine, NAME, parent_id, job["result"]["model_id"],
                                        split == "parent")
    assert (update["rows_before"] - update["rows_removed"] + update["rows_added"]
            == est.fit_info_["rows"])
    assert np.allclose(ours, theirs, atol=1e-6), np.abs(ours - theirs).max()
    cold = saving["cold"]  # the same problem from the cold start: the same model, nearly
    assert abs(saving["warm"]["holdout_accuracy"] - cold["holdout_accuracy"]) <= 0.02
