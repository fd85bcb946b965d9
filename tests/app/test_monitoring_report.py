"""GET /models/{id}/monitoring: reference (the training part), live (the log), drift (KS test:
training-like traffic not flagged, shifted traffic flagged), labelled (equal to
margin_statistics on the same rows, computed here from the answers and the labels given)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from app.models import service as models_service
from app.models.orm import Model
from solver.margins import margin_statistics
from tests.app.monitoring_support import settled
from tests.app.support import assert_problem, blobs, to_csv, trained_model


def _predict(client, model_id, X, ids=None):
    body = {"model_id": model_id, "instances": X.tolist()}
    if ids is not None:
        body["ids"] = ids
    r = client.post("/predict", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _report(client, model_id, **params):
    return settled(client.get(f"/models/{model_id}/monitoring", params=params))


def test_reference_is_the_training_part(client, worker, app):
    model = trained_model(client, worker, test_fraction=0.25, seed=3)
    rep = _report(client, model["id"])
    ref = rep["reference"]
    assert ref["n"] == model["n_train"]
    # theta: the stored training statistics' mean margin, computed by the training job
    stored = client.get(f"/models/{model['id']}/margins").json()["statistics"]
    assert ref["theta"] == pytest.approx(stored["mean"], rel=1e-9)
    assert rep["live"] == {"n": 0, "quantiles": None, "inside_margin_fraction": None,
                           "clipped_fraction": None}  # fmt: skip
    assert rep["drift"] is None and rep["labelled"]["n"] == 0


def test_drift_flags_shifted_traffic_only(client, worker, app):
    model = trained_model(client, worker)
    like, _ = blobs(n=200, seed=21)  # the training data's distribution, new draws
    answer = _predict(client, model["id"], like)
    # the rows are logged (a report waits for the log's writer) before ``middle`` is read, and
    # the next ones are predicted after it: no clock resolution to wait out
    assert _report(client, model["id"])["live"]["n"] == 200
    middle = datetime.now(UTC)
    shifted = like + np.array([4.0, -4.0, 0.0])
    shifted_answer = _predict(client, model["id"], shifted)
    first = _report(client, model["id"], until=middle.isoformat())
    assert first["live"]["n"] == 200
    assert first["drift"]["method"] == "ks_2samp" and first["drift"]["drifted"] is False
    assert first["drift"]["p_value"] >= first["drift"]["threshold"] == 0.01
    second = _report(client, model["id"], since=middle.isoformat())
    assert second["live"]["n"] == 200
    assert second["drift"]["drifted"] is True
    # live statistics: independently from the answers
    got = np.array([p["decision_value"] for p in shifted_answer["predictions"]])
    qs = second["live"]["quantiles"]
    assert qs["50"] == pytest.approx(float(np.percentile(got, 50)))
    theta = second["reference"]["theta"]
    assert second["live"]["inside_margin_fraction"] == pytest.approx(
        float(np.mean(np.abs(got) < theta))
    )
    clipped = [p["clipped"] for p in shifted_answer["predictions"]]
    assert second["live"]["clipped_fraction"] == pytest.approx(float(np.mean(clipped)))
    assert second["live"]["clipped_fraction"] > 0
    assert _report(client, model["id"])["live"]["n"] == 400
    assert len(answer["predictions"]) == 200


def test_labelled_equals_margin_statistics(client, worker):
    model = trained_model(client, worker)
    X, y = blobs(n=60, seed=8)
    ids = [f"r{i}" for i in range(60)]
    answer = _predict(client, model["id"], X, ids)
    given = list(range(0, 60, 2))  # feedback for half the rows
    labels = [str(y[i]) for i in given]
    labels[0] = "pos" if labels[0] == "neg" else "neg"  # one wrong prediction, at least
    fb = client.post(
        "/feedback",
        json={"model_id": model["id"], "ids": [ids[i] for i in given], "labels": labels},
    )
    assert settled(fb) == {"matched": 30, "unknown_ids": []}
    classes = answer["classes"]
    f = np.array([answer["predictions"][i]["decision_value"] for i in given])
    sign = np.array([1.0 if lab == classes[1] else -1.0 for lab in labels])
    expected = margin_statistics(sign * f)
    predicted = [answer["predictions"][i]["label"] for i in given]
    accuracy = np.mean([p == lab for p, lab in zip(predicted, labels, strict=True)])
    got = _report(client, model["id"])["labelled"]
    assert got["n"] == 30
    assert got["accuracy"] == pytest.approx(accuracy, rel=1e-12) and got["accuracy"] < 1
    for key in ("mean", "semivariance", "sv_ratio"):
        assert got[key] == pytest.approx(expected[key], rel=1e-12), key


def test_labelled_multiclass(client, worker):
    X, y = blobs(n=90, classes=("a", "b", "c"), shift=4.0)
    model = trained_model(client, worker, content=to_csv(X, y))
    answer = _predict(client, model["id"], X[:12], [f"m{i}" for i in range(12)])
    fb = client.post(
        "/feedback",
        json={"model_id": model["id"], "ids": [f"m{i}" for i in range(12)],
              "labels": y[:12].tolist()},
    )  # fmt: skip
    assert fb.json()["matched"] == 12
    classes = answer["classes"]
    D = np.array([p["decision_values"] for p in answer["predictions"]])
    own = np.array([D[i, classes.index(lab)] for i, lab in enumerate(y[:12])])
    best_other = np.array(
        [max(D[i, j] for j in range(3) if classes[j] != lab) for i, lab in enumerate(y[:12])]
    )
    expected = margin_statistics(own - best_other)
    got = _report(client, model["id"])["labelled"]
    assert got["mean"] == pytest.approx(expected["mean"], rel=1e-12)
    assert got["semivariance"] == pytest.approx(expected["semivariance"], rel=1e-12)


def test_report_errors_and_deleted_dataset(client, worker, app):
    assert_problem(client.get("/models/999999/monitoring"), 404)
    model = trained_model(client, worker)
    r = client.get(
        f"/models/{model['id']}/monitoring",
        params={"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
    )
    assert_problem(r, 422, "until")
    assert_problem(client.get(f"/models/{model['id']}/monitoring", params={"since": "x"}), 422)
    # Without its dataset the model has no reference (nor drift), the rest stays.
    with app.state.session_factory() as session:
        app.state.runtime.get(models_service.MODEL_CACHE).drop(model["id"])
        assert session.get(Model, model["id"]) is not None
    assert client.delete(f"/datasets/{model['dataset_id']}").status_code == 204
    _predict(client, model["id"], blobs(n=5, seed=1)[0])
    rep = _report(client, model["id"])
    assert rep["reference"] is None and rep["drift"] is None and rep["live"]["n"] == 5


def test_registered_model_report_follows_the_alias(client, worker):
    one = trained_model(client, worker)
    two = trained_model(client, worker, alpha=4.0)
    assert client.post("/registered-models", json={"name": "wd"}).status_code == 201
    for m in (one, two):
        assert client.post("/registered-models/wd/versions", json={"model_id": m["id"]})
    assert client.put("/registered-models/wd/aliases/production", json={"version": 1})
    X, _ = blobs(n=7, seed=3)
    client.post("/predict", json={"model": "wd@production", "instances": X.tolist()})
    client.post("/predict", json={"model_id": two["id"], "instances": X[:2].tolist()})
    url = "/registered-models/wd/monitoring"
    by_alias = settled(client.get(url, params={"alias": "production"}))
    # the model's own report, and the alias's arms (issue 48's canary: one, the primary)
    arms = by_alias.pop("arms")
    assert {k: v for k, v in _report(client, one["id"]).items() if k != "arms"} == by_alias
    assert by_alias["live"]["n"] == 7
    assert [(r["version"], r["arm"], r["n"]) for r in arms["records"]] == [(1, "primary", 7)]
    assert client.get(url, params={"version": 2}).json()["live"]["n"] == 2
    # neither: the bare name's version, production while it is set, else the newest
    assert client.get(url).json()["model_id"] == one["id"]
    assert client.delete("/registered-models/wd/aliases/production").status_code == 204
    assert client.get(url).json()["model_id"] == two["id"]
    assert_problem(client.get(url, params={"alias": "nope"}), 404)
    assert_problem(client.get("/registered-models/none/monitoring"), 404)
    assert_problem(client.get(url, params={"alias": "production", "version": 1}), 422, "version")
