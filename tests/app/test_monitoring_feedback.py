"""POST /feedback: true labels joined to logged predictions by id; labels checked against the
model's classes; unknown ids reported."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.main import create_app
from app.monitoring import log as prediction_log
from app.monitoring.orm import PredictionLog
from tests.app.monitoring_support import settled
from tests.app.support import assert_problem, blobs, trained_model


def _rows(app) -> dict[str, PredictionLog]:
    prediction_log.writer(app.state.runtime).flush()
    with app.state.session_factory() as session:
        return {r.prediction_id: r for r in session.scalars(select(PredictionLog))}


def test_feedback_joined_by_id(client, worker, app):
    model = trained_model(client, worker)
    X, _ = blobs(n=4, seed=2)
    r = client.post(
        "/predict",
        json={"model_id": model["id"], "instances": X.tolist(), "ids": ["a", "b", 3, "d"]},
        headers={"X-Request-ID": "unused"},
    )
    assert r.status_code == 200, r.text
    # (the rows may still be queued: /feedback writes this process's queue first)
    fb = client.post(
        "/feedback",
        json={
            "model_id": model["id"],
            "ids": ["a", 3, "zz", "a"],
            "labels": ["neg", "pos", "neg", "pos"],
        },
    )
    assert fb.status_code == 200, fb.text
    assert settled(fb) == {"matched": 2, "unknown_ids": ["zz"]}
    rows = _rows(app)
    classes = model["classes"]
    assert classes[rows["a"].true_class] == "pos"  # the last label given for an id
    assert classes[rows["3"].true_class] == "pos"
    assert rows["b"].true_class is None and rows["d"].true_class is None
    assert rows["a"].feedback_at is not None and rows["b"].feedback_at is None


def test_feedback_by_reference_and_default_ids(client, worker, app):
    model = trained_model(client, worker)
    assert client.post("/registered-models", json={"name": "m"}).status_code == 201
    assert client.post("/registered-models/m/versions", json={"model_id": model["id"]})
    X, _ = blobs(n=2, seed=2)
    r = client.post(
        "/predict", json={"model": "m", "instances": X.tolist()}, headers={"X-Request-ID": "q9"}
    )
    assert [p["id"] for p in r.json()["predictions"]] == ["q9:0", "q9:1"]
    fb = client.post("/feedback", json={"model": "m/1", "ids": ["q9:1"], "labels": ["pos"]})
    assert settled(fb) == {"matched": 1, "unknown_ids": []}
    assert _rows(app)["q9:1"].true_class == model["classes"].index("pos")
    # Another model's ids are not this one's.
    other = trained_model(client, worker, alpha=4.0)
    fb = client.post("/feedback", json={"model_id": other["id"], "ids": ["q9:0"], "labels": [0]})
    assert assert_problem(fb, 422)["errors"][0]["loc"] == ["body", "labels", 0]  # not a class
    fb = client.post(
        "/feedback", json={"model_id": other["id"], "ids": ["q9:0"], "labels": ["neg"]}
    )
    assert settled(fb) == {"matched": 0, "unknown_ids": ["q9:0"]}


def test_feedback_checked(client, worker, app):
    model = trained_model(client, worker)
    base = {"model_id": model["id"], "ids": ["a", "b"]}
    body = assert_problem(client.post("/feedback", json={**base, "labels": ["neg", "cat"]}), 422)
    assert body["errors"][0]["loc"] == ["body", "labels", 1]  # names the row
    assert_problem(client.post("/feedback", json={**base, "labels": ["neg"]}), 422, "labels")
    assert_problem(client.post("/feedback", json={"ids": ["a"], "labels": ["neg"]}), 422, "model")
    assert_problem(
        client.post("/feedback", json={"model_id": 999999, "ids": ["a"], "labels": ["neg"]}),
        404,
        "model_id",
    )
    r = client.post("/feedback", json={"model": "nope@production", "ids": ["a"], "labels": [1]})
    assert_problem(r, 404)
    assert_problem(client.post("/feedback", json={**base, "ids": ["x" * 129], "labels": [1]}), 422)
    many = {"model_id": model["id"], "ids": list(range(5)), "labels": ["neg"] * 5}
    answer = settled(client.post("/feedback", json=many))
    assert answer == {"matched": 0, "unknown_ids": [*range(5)]}
    small = create_app(app.state.settings.model_copy(update={"max_predict_instances": 4}))
    with TestClient(small) as c:
        assert assert_problem(c.post("/feedback", json=many), 413)["field"] == "ids"
