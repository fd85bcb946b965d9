"""app.predict.fast_path: a one-row /predict answered before FastAPI's routing gets exactly the
route's answer, and everything it must not answer reaches the route unchanged."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.predict import fast_path
from app.predict.fast_path import PredictFastPath
from tests.app.support import blobs, trained_model


@pytest.fixture
def served(client, worker, settings, app):
    """A trained model, the app (fast path on, its cache warm) and a second app on the same
    database without the fast path (the route answers everything)."""
    model = trained_model(client, worker)
    X, y = blobs(n=4, seed=5)
    warm = client.post("/predict", json={"model_id": model["id"], "instances": X[:1].tolist()})
    assert warm.status_code == 200, warm.text
    plain = create_app(settings)
    plain.user_middleware = [m for m in plain.user_middleware if m.cls is not PredictFastPath]
    with TestClient(plain) as route_only:
        route_only.post("/predict", json={"model_id": model["id"], "instances": X[:1].tolist()})
        yield model, X, y, route_only


def _bodies(model_id: int, X, y) -> list[tuple[str, bytes, dict[str, str]]]:
    row = X[0].tolist()
    js = {"Content-Type": "application/json"}

    def body(value: object) -> bytes:
        return json.dumps(value).encode()

    return [
        ("one row", body({"model_id": model_id, "instances": [row]}), js),
        ("ids and labels", body({"model_id": model_id, "instances": [row], "ids": ["a"],
                                 "labels": [y[0].item() if hasattr(y[0], "item") else y[0]]}), js),
        ("two rows", body({"model_id": model_id, "instances": X[:2].tolist()}), js),
        ("unknown model", body({"model_id": 999_999, "instances": [row]}), js),
        ("short row", body({"model_id": model_id, "instances": [row[:-1]]}), js),
        ("extra field", body({"model_id": model_id, "instances": [row], "x": 1}), js),
        ("bad label", body({"model_id": model_id, "instances": [row], "labels": ["nope"]}), js),
        ("NaN literal", b'{"model_id": %d, "instances": [[NaN, 1, 2]]}' % model_id, js),
        ("NUL escape", body({"model_id": model_id, "instances": [["\u0000", 1, 2]]}), js),
        ("both ids", body({"model_id": model_id, "model": "x", "instances": [row]}), js),
        ("not json", b"{", js),
        ("charset", body({"model_id": model_id, "instances": [row]}),
         {"Content-Type": "application/json; charset=utf-8"}),
        ("text/plain", body({"model_id": model_id, "instances": [row]}),
         {"Content-Type": "text/plain"}),
    ]


@pytest.fixture
def answered(monkeypatch) -> list[bool]:
    """Whether the fast path answered each request it read (not those it let pass unread)."""
    seen: list[bool] = []
    original = PredictFastPath._answer

    async def spy(self, scope, body):
        response = await original(self, scope, body)
        seen.append(response is not None)
        return response

    monkeypatch.setattr(PredictFastPath, "_answer", spy)
    return seen


def test_every_answer_is_the_route_s(served, client, answered) -> None:
    model, X, y, route_only = served
    fast = []
    for name, content, headers in _bodies(model["id"], X, y):
        headers = {**headers, "X-Request-ID": "fast-path-test"}
        before = answered.count(True)
        got = client.post("/predict", content=content, headers=headers)
        if answered.count(True) > before:
            fast.append(name)
        want = route_only.post("/predict", content=content, headers=headers)
        assert got.status_code == want.status_code, name
        assert got.json() == want.json(), name
        assert got.headers["content-type"] == want.headers["content-type"], name
    assert fast == ["one row", "ids and labels", "two rows", "charset"]


def test_a_query_string_reaches_the_route(served, client, answered) -> None:
    model, X, _, _ = served
    body = {"model_id": model["id"], "instances": [X[0].tolist()]}
    r = client.post("/predict?model_id=1", json=body)
    assert r.status_code == 200, r.text  # the route's answer: POST takes no query check
    assert answered == []


def test_the_fast_path_answers_and_is_counted_under_its_route(served, client, answered) -> None:
    model, X, _, _ = served
    r = client.post("/predict", json={"model_id": model["id"], "instances": [X[0].tolist()]})
    assert r.status_code == 200 and answered == [True]
    metrics = client.get("/metrics").text
    assert 'route="/predict",status="200"' in metrics
    assert "<unmatched>" not in metrics.split("msvmav_requests_total", 1)[-1].split("#", 1)[0]


def test_a_large_body_goes_to_the_route(served, client, monkeypatch) -> None:
    model, X, _, _ = served
    monkeypatch.setattr(fast_path, "FAST_BODY_BYTES", 10)
    seen = []
    original = PredictFastPath._answer

    async def spy(self, scope, body):
        seen.append(body)
        return await original(self, scope, body)

    monkeypatch.setattr(PredictFastPath, "_answer", spy)
    r = client.post("/predict", json={"model_id": model["id"], "instances": [X[0].tolist()]})
    assert r.status_code == 200 and seen == []
