"""GET /models/{id}/monitoring's performance_estimate: the accuracy expected from the model's
calibrated probabilities of the logged decision values, computed here by hand from /predict's
decision values and the stored calibrator's parameters (Platt's a, b), with its interval; the
realised accuracy of the rows with feedback beside it; null for a model without calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.serving.acquire import cold
from tests.app.support import blobs, run_jobs, to_csv, upload

Z95 = 1.959963984540054


def _trained(client, worker, calibration: str, content: bytes | None = None) -> dict:
    """A model trained with ``calibration``: /train's own field where it has one, else the
    estimator parameter of the same name (branches before the service's field)."""
    if content is None:
        content = to_csv(*blobs())
    ds = upload(client, content)
    body = {"dataset_id": ds["id"], "max_iter": 30, "calibration": calibration}
    r = client.post("/train", json=body)
    if r.status_code == 422 and "calibration" in r.text:
        del body["calibration"]
        r = client.post("/train", json={**body, "params": {"calibration": calibration}})
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    job = client.get(f"/jobs/{r.json()['id']}").json()
    return client.get(f"/models/{job['model_id']}").json()


def _predict(client, model_id, X, ids):
    r = client.post("/predict", json={"model_id": model_id, "instances": X.tolist(), "ids": ids})
    assert r.status_code == 200, r.text
    return r.json()


def _estimate(client, model_id):
    r = client.get(f"/models/{model_id}/monitoring")
    assert r.status_code == 200, r.text
    return r.json()["performance_estimate"]


def _calibrator(app, model_id) -> dict:
    with app.state.session_factory() as session:
        est = cold(session, model_id).estimator
        return est.calibrator_.to_dict()


def _interval(confidence: np.ndarray) -> tuple[float, float, float]:
    mean = float(confidence.mean())
    sd = math.sqrt(float(np.sum(confidence * (1 - confidence)))) / confidence.size
    return mean, max(0.0, mean - Z95 * sd), min(1.0, mean + Z95 * sd)


def test_estimate_is_the_mean_calibrated_confidence_beside_the_realised_accuracy(
        client, worker, app):
    model = _trained(client, worker, "sigmoid")
    X, y = blobs(n=60, seed=8)
    ids = [f"e{i}" for i in range(60)]
    answer = _predict(client, model["id"], X, ids)
    cal = _calibrator(app, model["id"])
    a, b = cal["params"][0]["a"], cal["params"][0]["b"]
    f = np.array([p["decision_value"] for p in answer["predictions"]])
    p1 = 1.0 / (1.0 + np.exp(a * f + b))  # P(classes[1]), Platt by hand
    positive = np.array([p["label"] == answer["classes"][1] for p in answer["predictions"]])
    mean, low, high = _interval(np.where(positive, p1, 1.0 - p1))
    given = list(range(0, 60, 3))
    labels = [str(y[i]) for i in given]
    fb = client.post("/feedback", json={"model_id": model["id"],
                                        "ids": [ids[i] for i in given], "labels": labels})
    assert fb.json()["matched"] == 20
    got = _estimate(client, model["id"])
    assert got["method"] == "cbpe" and got["n"] == 60
    assert got["estimate"] == pytest.approx(mean, rel=1e-9)
    assert got["low"] == pytest.approx(low, rel=1e-9)
    assert got["high"] == pytest.approx(high, rel=1e-9)
    predicted = [answer["predictions"][i]["label"] for i in given]
    assert got["n_labelled"] == 20
    assert got["realised_accuracy"] == pytest.approx(
        np.mean([p == lab for p, lab in zip(predicted, labels, strict=True)]))


def test_multiclass_estimate_normalises_one_vs_rest(client, worker, app):
    X, y = blobs(n=90, classes=("a", "b", "c"), shift=2.0)
    model = _trained(client, worker, "sigmoid", to_csv(X, y))
    answer = _predict(client, model["id"], X[:30], [f"m{i}" for i in range(30)])
    cal = _calibrator(app, model["id"])
    D = np.array([p["decision_values"] for p in answer["predictions"]])
    P = np.column_stack([1.0 / (1.0 + np.exp(c["a"] * D[:, j] + c["b"]))
                         for j, c in enumerate(cal["params"])])
    P /= P.sum(axis=1, keepdims=True)
    chosen = [answer["classes"].index(p["label"]) for p in answer["predictions"]]
    mean, low, high = _interval(P[np.arange(30), chosen])
    got = _estimate(client, model["id"])
    assert got["estimate"] == pytest.approx(mean, rel=1e-9)
    assert (got["low"], got["high"]) == (pytest.approx(low, rel=1e-9),
                                         pytest.approx(high, rel=1e-9))
    assert got["realised_accuracy"] is None and got["n_labelled"] == 0


def test_no_estimate_without_calibration(client, worker):
    model = _trained(client, worker, "none")
    _predict(client, model["id"], blobs(n=5, seed=2)[0], [f"n{i}" for i in range(5)])
    assert _estimate(client, model["id"]) is None
