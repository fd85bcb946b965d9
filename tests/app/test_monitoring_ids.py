"""Prediction ids (given, or "{request_id}:{row}") echoed by /predict and /predict/file, and
each row's `clipped` flag (a feature outside the training range, clipped by the scaling)."""

from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

from app.serving.acquire import cold
from app.serving.model import ServedModel
from solver.scaling import MinMaxScaling
from tests.app.support import assert_problem, blobs, to_csv, trained_model


def _outside(app, model_id: int, X: np.ndarray) -> list[bool]:
    """Independently: does any raw value of a row scale outside [0, 1] with the stored
    training minimum and maximum?"""
    with app.state.session_factory() as session:
        scaling = cold(session, model_id).scaling
    span = scaling.data_max - scaling.data_min
    scale = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 1.0)
    z = (X - scaling.data_min) * scale
    return [bool(v) for v in ((z < 0) | (z > 1)).any(axis=1)]


def test_ids_echoed_and_defaulted(client, worker):
    model = trained_model(client, worker)
    X, _ = blobs(n=3, seed=5)
    rows = X.tolist()
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": rows, "ids": ["a", 7, "x" * 128]}
    )
    assert r.status_code == 200, r.text
    assert [p["id"] for p in r.json()["predictions"]] == ["a", 7, "x" * 128]
    r = client.post(
        "/predict",
        json={"model_id": model["id"], "instances": rows},
        headers={"X-Request-ID": "req-42"},
    )
    assert r.status_code == 200, r.text
    assert [p["id"] for p in r.json()["predictions"]] == ["req-42:0", "req-42:1", "req-42:2"]
    # Without a request id header the service's own request id prefixes them.
    r = client.post("/predict", json={"model_id": model["id"], "instances": rows[:1]})
    assert r.json()["predictions"][0]["id"] == r.headers["X-Request-ID"] + ":0"


def test_ids_checked(client, worker):
    model = trained_model(client, worker)
    rows = blobs(n=2, seed=5)[0].tolist()
    base = {"model_id": model["id"], "instances": rows}
    assert_problem(client.post("/predict", json={**base, "ids": ["a"]}), 422, "ids")
    assert_problem(client.post("/predict", json={**base, "ids": ["a", "y" * 129]}), 422)
    assert_problem(client.post("/predict", json={**base, "ids": ["a", 1.5]}), 422)
    assert_problem(client.post("/predict", json={**base, "ids": ["a", ""]}), 422)


def test_file_ids(client, worker):
    model = trained_model(client, worker)
    X, y = blobs(n=4, seed=9)
    files = {"file": ("rows.csv", to_csv(X, y))}
    form = {"model_id": str(model["id"]), "label": "y"}
    r = client.post("/predict/file", files=files, data={**form, "ids": json.dumps([1, 2, "c", 4])})
    assert r.status_code == 200, r.text
    assert [p["id"] for p in r.json()["predictions"]] == [1, 2, "c", 4]
    r = client.post("/predict/file", files=files, data=form, headers={"X-Request-ID": "f1"})
    assert [p["id"] for p in r.json()["predictions"]] == [f"f1:{i}" for i in range(4)]
    for bad in ("[1, 2]", "{}", "[1, 2, 3, 4.5]", "not json"):
        r = client.post("/predict/file", files=files, data={**form, "ids": bad})
        assert_problem(r, 422, "ids")


def test_clipped_rows_flagged(client, worker, app):
    model = trained_model(client, worker)
    X, _ = blobs(n=20, seed=11)
    X[3, 1] = 1e6  # far above the training range
    X[7, 0] = -1e6  # far below
    r = client.post("/predict", json={"model_id": model["id"], "instances": X.tolist()})
    assert r.status_code == 200, r.text
    got = [p["clipped"] for p in r.json()["predictions"]]
    assert got == _outside(app, model["id"], X)
    assert got[3] and got[7] and not all(got)
    # Clipping still applies: the extreme row scores like the same row at the range's edge.
    with app.state.session_factory() as session:
        top = cold(session, model["id"]).scaling.data_max[1]
    edge = X[3].copy()
    edge[1] = top
    both = client.post(
        "/predict", json={"model_id": model["id"], "instances": [X[3].tolist(), edge.tolist()]}
    )
    far, near = both.json()["predictions"]
    assert far["clipped"] is True
    assert near["clipped"] is _outside(app, model["id"], edge[None])[0]
    assert far["decision_value"] == near["decision_value"]


def test_scale_flags_sparse_like_dense():
    rng = np.random.default_rng(0)
    train = np.abs(rng.normal(size=(30, 5)))
    train[:, 2] = 0.0  # a constant feature
    train[0] = 0.0  # every minimum 0: a CSR matrix stays sparse
    scaling = MinMaxScaling.fit(train)
    X = np.abs(rng.normal(size=(12, 5))) * 1.5
    X[X < 0.8] = 0.0
    loaded = ServedModel(id=1, n_features=5, encoding={}, estimator=None, scaling=scaling)
    dense, dense_flags = loaded.scale(X.copy())
    sparse, sparse_flags = loaded.scale(sp.csr_matrix(X))
    np.testing.assert_array_equal(dense_flags, sparse_flags)
    assert sp.issparse(sparse)
    np.testing.assert_allclose(sparse.toarray(), dense)
    np.testing.assert_allclose(dense, scaling.transform(X))
    z = (X - scaling.data_min) * scaling.scale
    np.testing.assert_array_equal(dense_flags, ((z < 0) | (z > 1)).any(axis=1))
    assert dense_flags.any() and not dense_flags.all()
