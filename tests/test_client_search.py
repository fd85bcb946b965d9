"""The Python client passes /train's search and budget (issue 49): the body it sends."""

from __future__ import annotations

import json

import httpx
import pytest

from msvmav_client import Client


def _sent(**kwargs) -> dict:
    bodies: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(202, json={"id": 1, "status": "queued"})

    client = Client("http://test", transport=httpx.MockTransport(answer))
    client.train(7, **kwargs)
    (body,) = bodies
    return body


@pytest.mark.parametrize(("kwargs", "search"), [
    ({}, None),
    ({"search": "auto"}, "auto"),
    ({"search": "none"}, "none"),
    ({"budget_seconds": 30}, {"grid": "auto", "budget_seconds": 30}),
    ({"search": "auto", "budget_seconds": 5}, {"grid": "auto", "budget_seconds": 5}),
    ({"search": {"grid": "auto", "algorithms": ["msvmav", "svm"]}, "budget_seconds": 9},
     {"grid": "auto", "algorithms": ["msvmav", "svm"], "budget_seconds": 9}),
    ({"search": {"grid": "quick", "cv": 3}}, {"grid": "quick", "cv": 3}),
])
def test_train_sends_search_and_budget(kwargs, search):
    body = _sent(**kwargs)
    assert body["dataset_id"] == 7
    assert body.get("search") == search
    assert "budget_seconds" not in body
