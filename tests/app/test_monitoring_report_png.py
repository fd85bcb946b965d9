"""GET /models/{id}/monitoring.png and /registered-models/{name}/monitoring.png: a PNG of the
report's window (decodes, 1200 × 450), errors and keys as the JSON routes; the daily feedback
series it plots is the JSON report's ``labelled.daily``, checked against the labels given."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from pydantic import SecretStr
from sqlalchemy.orm import Session

from app.auth import service as keys
from app.auth.keys import Scope
from app.main import create_app
from app.monitoring import figure
from tests.app.support import assert_png, assert_problem, blobs, trained_model


def _image(r) -> Image.Image:
    img = Image.open(io.BytesIO(assert_png(r)))
    img.load()  # decodes every pixel (a truncated or corrupt PNG raises)
    return img


def _pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("RGB"), dtype=np.int16)


def test_png_of_a_model_and_of_a_registered_model(client, worker):
    model = trained_model(client, worker)
    empty = _image(client.get(f"/models/{model['id']}/monitoring.png"))
    assert empty.size == (figure.WIDTH_PX, figure.HEIGHT_PX) == (1200, 450)
    X, y = blobs(n=40, seed=9)
    ids = [f"p{i}" for i in range(40)]
    r = client.post("/predict", json={"model_id": model["id"], "instances": X.tolist(), "ids": ids})
    assert r.status_code == 200
    labels = y.tolist()
    labels[0] = "pos" if labels[0] == "neg" else "neg"
    fb = client.post("/feedback", json={"model_id": model["id"], "ids": ids, "labels": labels})
    assert fb.json()["matched"] == 40
    full = _image(client.get(f"/models/{model['id']}/monitoring.png"))
    assert full.size == (1200, 450)
    # the live curve and the daily series are drawn: the figure changed on both halves
    diff = np.abs(_pixels(full) - _pixels(empty)).sum(axis=2) > 0
    assert diff[:, :600].sum() > 500 and diff[:, 600:].sum() > 500
    # what the right half plots: one day, the accuracy of the predictions against the labels
    answer = r.json()
    predicted = [p["label"] for p in answer["predictions"]]
    sign = np.where(np.array(labels) == answer["classes"][1], 1.0, -1.0)
    f = np.array([p["decision_value"] for p in answer["predictions"]])
    accuracy = np.mean([p == t for p, t in zip(predicted, labels, strict=True)])
    daily = client.get(f"/models/{model['id']}/monitoring").json()["labelled"]["daily"]
    assert daily == [
        {
            "day": datetime.now(UTC).date().isoformat(),
            "n": 40,
            "accuracy": pytest.approx(accuracy, rel=1e-12),
            "mean": pytest.approx(float(np.mean(sign * f)), rel=1e-12),  # θ̂: mean margin
        }
    ]
    assert daily[0]["accuracy"] < 1
    assert client.post("/registered-models", json={"name": "mon"}).status_code == 201
    client.post("/registered-models/mon/versions", json={"model_id": model["id"]})
    client.put("/registered-models/mon/aliases/production", json={"version": 1})
    url = "/registered-models/mon/monitoring.png"
    by_alias = client.get(url, params={"alias": "production"})
    assert by_alias.content == client.get(f"/models/{model['id']}/monitoring.png").content
    assert _image(by_alias).size == (1200, 450)


def test_png_errors_as_the_json_route(client, worker):
    assert_problem(client.get("/models/999999/monitoring.png"), 404)
    assert_problem(client.get("/registered-models/none/monitoring.png"), 404)
    model = trained_model(client, worker)
    url = f"/models/{model['id']}/monitoring.png"
    bad = {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    assert_problem(client.get(url, params=bad), 422, "until")
    assert_problem(client.get(url, params={"since": "x"}), 422)
    assert client.post("/registered-models", json={"name": "mp"}).status_code == 201
    client.post("/registered-models/mp/versions", json={"model_id": model["id"]})
    r = client.get("/registered-models/mp/monitoring.png", params={"alias": "a", "version": 1})
    assert_problem(r, 422, "version")
    assert_problem(client.get("/registered-models/mp/monitoring.png", params={"alias": "x"}), 404)


@pytest.fixture
def keyed(settings, engine) -> Iterator[TestClient]:
    admin = settings.model_copy(update={"admin_key": SecretStr("admin-key-0123456789abcdef")})
    with TestClient(create_app(admin)) as c:
        yield c


def test_png_needs_a_read_key_as_the_json_route(keyed, engine, worker):
    with Session(engine) as session:
        _, read = keys.create(session, "reader", Scope.read)
        _, write = keys.create(session, "writer", Scope.write)
    model = trained_model(
        TestClient(keyed.app, headers={"Authorization": f"Bearer {write}"}), worker
    )
    for path in (f"/models/{model['id']}/monitoring", f"/models/{model['id']}/monitoring.png"):
        assert_problem(keyed.get(path), 401)
        assert_problem(keyed.get(path, headers={"Authorization": "Bearer wrong"}), 401)
        ok = keyed.get(path, headers={"Authorization": f"Bearer {read}"})
        assert ok.status_code == 200, ok.text
    assert_problem(keyed.get("/registered-models/x/monitoring.png"), 401)
