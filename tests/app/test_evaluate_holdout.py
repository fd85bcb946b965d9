"""POST /models/{ref}/evaluate on the model's own dataset scores only the rows it did not train
on (its detail's ``holdout.rows``) unless ``rows=all``, and says which rows it scored; on SQLite
and on PostgreSQL (the ``client`` fixture's backends)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics

from tests.app.support import assert_problem, blobs, to_csv, trained_model, upload

# the hold-out rows are read from the model's stored summary and the dataset's stored rows
pytestmark = pytest.mark.postgres


def _data(n: int = 120, seed: int = 4):
    X, y = blobs(n=n, d=3, seed=seed, shift=1.5)  # overlapping: hold-out accuracy below 1
    return np.vectorize(lambda v: float(f"{v:.6f}"))(X), y  # as the CSV holds them


def _labels(client, model_id: int, rows) -> np.ndarray:
    r = client.post("/predict", json={"model_id": model_id, "instances": rows})
    assert r.status_code == 200, r.text
    return np.array([p["label"] for p in r.json()["predictions"]])


def _evaluate(client, model_id: int, **form):
    return client.post(f"/models/{model_id}/evaluate", data={k: str(v) for k, v in form.items()})


def test_evaluate_on_the_models_own_dataset_scores_its_holdout_rows(client, worker):
    X, y = _data()
    model = trained_model(client, worker, to_csv(X, y))
    held = model["holdout"]["rows"]
    assert len(held) == 24 and held == sorted(held)
    r = _evaluate(client, model["id"], dataset_id=model["dataset_id"])
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["rows"], answer["row_indices"], answer["n"]) == ("holdout", held, 24)
    predicted = _labels(client, model["id"], X[held].tolist())
    accuracy = metrics.accuracy_score(y[held], predicted)
    assert answer["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert answer["metrics"]["accuracy"] == pytest.approx(model["holdout_accuracy"], abs=1e-12)
    assert answer["metrics"]["confusion_matrix"]["matrix"] == metrics.confusion_matrix(
        y[held], predicted, labels=["neg", "pos"]).tolist()

    r = _evaluate(client, model["id"], dataset_id=model["dataset_id"], rows="all")
    assert r.status_code == 200, r.text
    every = r.json()
    assert (every["rows"], every["row_indices"], every["n"]) == ("all", None, 120)
    accuracy = metrics.accuracy_score(y, _labels(client, model["id"], X.tolist()))
    assert every["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12)

    r = client.post(f"/models/{model['id']}/evaluate.svg",
                    data={"dataset_id": str(model["dataset_id"])})
    assert r.status_code == 200 and "hold-out rows" in r.text


def test_evaluate_without_a_holdout_refuses_unless_asked_for_every_row(client, worker):
    X, y = _data()
    model = trained_model(client, worker, to_csv(X, y), test_fraction=None)
    assert model["holdout"] is None
    body = assert_problem(_evaluate(client, model["id"], dataset_id=model["dataset_id"]),
                          422, "rows")
    assert "kept no hold-out rows" in body["detail"] and "rows=all" in body["detail"]
    r = _evaluate(client, model["id"], dataset_id=model["dataset_id"], rows="all")
    assert r.status_code == 200, r.text
    assert (r.json()["rows"], r.json()["n"]) == ("all", 120)


def test_evaluate_on_other_rows_scores_all_of_them(client, worker):
    X, y = _data()
    model = trained_model(client, worker, to_csv(X, y))
    other = upload(client, to_csv(X[:50], y[:50]), "other.csv")
    r = _evaluate(client, model["id"], dataset_id=other["id"])
    assert r.status_code == 200, r.text
    assert (r.json()["rows"], r.json()["row_indices"], r.json()["n"]) == ("all", None, 50)
    body = assert_problem(_evaluate(client, model["id"], dataset_id=other["id"],
                                    rows="holdout"), 422, "rows")
    assert f"not of dataset {other['id']}" in body["detail"]
    content = to_csv(X[:30], y[:30])
    r = client.post(f"/models/{model['id']}/evaluate", files={"file": ("r.csv", content)})
    assert r.status_code == 200 and (r.json()["rows"], r.json()["n"]) == ("all", 30), r.text
    r = client.post(f"/models/{model['id']}/evaluate", files={"file": ("r.csv", content)},
                    data={"rows": "holdout"})
    assert_problem(r, 422, "rows")
    assert_problem(_evaluate(client, model["id"], dataset_id=other["id"], rows="some"),
                   422, "rows")
