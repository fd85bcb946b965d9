"""Issue 45: ``GET /v2/models/{name}`` listed ``versions: ["1"]`` (the version its production
alias serves) while version 2 existed. The Open Inference Protocol's ``versions`` are the
versions a client may request at ``/v2/models/{name}/versions/{v}``: every version the
registered model has, whichever reference named it; a stored model's id has none."""

from __future__ import annotations

from tests.app.support import trained_model


def _register(client, name: str, model_id: int) -> int:
    r = client.post(f"/registered-models/{name}/versions", json={"model_id": model_id})
    assert r.status_code == 201, r.text
    return r.json()["version"]


def test_model_metadata_lists_every_registered_version(client, worker):
    models = [trained_model(client, worker, max_iter=10 + i) for i in range(3)]
    assert client.post("/registered-models", json={"name": "credit"}).status_code == 201
    assert [_register(client, "credit", m["id"]) for m in models] == [1, 2, 3]
    r = client.put("/registered-models/credit/aliases/production", json={"version": 1})
    assert r.status_code == 200, r.text
    assert client.delete("/registered-models/credit/versions/2").status_code == 204
    for path in (
        "/v2/models/credit",
        "/v2/models/credit@production",
        "/v2/models/credit/versions/3",
        "/v2/models/credit/versions/1",
    ):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.json()["versions"] == ["1", "3"], (path, r.json())
    # a stored model's id is no registered model: nothing to request at /versions/{v}
    assert client.get(f"/v2/models/{models[0]['id']}").json()["versions"] == []
    # the versions requestable are exactly those listed
    assert client.get("/v2/models/credit/versions/2").status_code == 404
