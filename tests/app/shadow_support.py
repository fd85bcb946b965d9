"""What the shadow tests share (tests/app/test_shadow.py,
tests/app/test_monitoring_log_durable.py): the registered model's name and its versions
registered."""

from __future__ import annotations

from fastapi.testclient import TestClient

NAME = "credit"


def register(client: TestClient, model_ids: list[int], aliases: dict[str, int]) -> None:
    assert client.post("/registered-models", json={"name": NAME}).status_code == 201
    for model_id in model_ids:
        r = client.post(f"/registered-models/{NAME}/versions", json={"model_id": model_id})
        assert r.status_code == 201, r.text
    for alias, version in aliases.items():
        r = client.put(f"/registered-models/{NAME}/aliases/{alias}", json={"version": version})
        assert r.status_code == 200, r.text
