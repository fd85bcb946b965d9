"""Every door into the one scoring core (app.serving.scoring) answers the same, against a live
``msvmav serve`` (SQLite, and PostgreSQL when TEST_DATABASE_URL is set): a bare registered
name means one version at /predict, /v2 and invocations, and each door's numbers are
/predict's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton

from app.export.bundle import load_bundle
from msvmav_client import Client
from tests.app.protocol_support import (
    ADMIN_KEY,
    Served,
    decisions,
    key,
    served_models,
    triton_client,
)


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_models(database_url, tmp_path_factory.mktemp("doors")) as served:
        yield served


def _by_predict(served: Served, model: str, X: np.ndarray) -> dict[str, Any]:
    r = served.http.post("/predict", json={"model": model, "instances": X.tolist()})
    assert r.status_code == 200, r.text
    return r.json()


def _by_v2(served: Served, name: str, X: np.ndarray) -> dict[str, Any]:
    body = {
        "inputs": [
            {
                "name": "input",
                "datatype": "FP64",
                "shape": list(X.shape),
                "data": X.reshape(-1).tolist(),
            }
        ]
    }
    r = served.http.post(f"/v2/models/{name}/infer", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _by_invocations(served: Served, ref: str, X: np.ndarray) -> dict[str, Any]:
    r = served.http.post(f"/models/{ref}/invocations", json={"instances": X.tolist()})
    assert r.status_code == 200, r.text
    return r.json()


def _v2_output(answer: dict[str, Any], name: str) -> np.ndarray:
    out = next(o for o in answer["outputs"] if o["name"] == name)
    return np.asarray(out["data"]).reshape(out["shape"])


def _version(served: Served, model_id: int) -> int:
    return 1 if model_id == served.binary else 2


def test_a_bare_name_is_the_same_version_at_every_door(served):
    """While `production` (version 1) and the newest (version 2) differ, /predict, /v2 and
    invocations all answer with `production`'s; once the alias is removed, all with the
    newest."""
    X = served.X[:7]
    by_id = {m: decisions(_by_predict(served, str(m), X)) for m in (served.binary, served.binary2)}
    assert not np.allclose(by_id[served.binary], by_id[served.binary2])
    for expected in (served.binary, served.binary2):
        answer = _by_predict(served, served.name, X)
        assert answer["model_id"] == expected
        assert answer["version"] == _version(served, expected)
        assert answer["alias"] == ("production" if expected == served.binary else None)
        np.testing.assert_array_equal(decisions(answer), by_id[expected])
        v2 = _by_v2(served, served.name, X)
        assert v2["model_version"] == str(_version(served, expected))
        np.testing.assert_allclose(_v2_output(v2, "decision"), by_id[expected], rtol=0, atol=0)
        mlflow = _by_invocations(served, served.name, X)
        np.testing.assert_allclose(decisions(mlflow), by_id[expected], rtol=0, atol=0)
        if expected == served.binary:
            r = served.http.delete(f"/registered-models/{served.name}/aliases/production")
            assert r.status_code in (200, 204), r.text
    r = served.http.put(f"/registered-models/{served.name}/aliases/production", json={"version": 1})
    assert r.status_code == 200, r.text


def _probabilities(answer: dict[str, Any]) -> np.ndarray:
    keys = [str(c) for c in answer["classes"]]
    return np.array([[p["probabilities"][k] for k in keys] for p in answer["predictions"]])


@pytest.mark.parametrize("which", ["binary", "multi", "mixed"])
def test_every_door_gives_predicts_probabilities(served, which):
    """/v2 (JSON and binary tensors), invocations (rows and predict_proba), the Python client
    and an exported bundle give /predict's probabilities within 1e-9."""
    model_id = getattr(served, which)
    rows = served.mixed_rows if which == "mixed" else served.X.tolist()
    reference = served.http.post("/predict", json={"model_id": model_id, "instances": rows})
    assert reference.status_code == 200, reference.text
    expected = _probabilities(reference.json())
    assert expected.shape == (len(rows), len(reference.json()["classes"]))
    got: dict[str, np.ndarray] = {}
    if which != "mixed":
        X = np.asarray(rows)
        v2 = _by_v2(served, str(model_id), X)
        got["v2 json"] = _v2_output(v2, "probability")
        with triton_client(served) as tc:
            tensor = triton.InferInput("input", list(X.shape), "FP64")
            tensor.set_data_from_numpy(X, binary_data=True)
            result = tc.infer(str(model_id), [tensor], headers=key())
            got["v2 binary"] = result.as_numpy("probability")
        metadata = served.http.get(f"/v2/models/{model_id}").json()
        assert {"name": "probability", "datatype": "FP64", "shape": [-1, expected.shape[1]]} in (
            metadata["outputs"]
        )
    r = served.http.post(f"/models/{model_id}/invocations", json={"instances": rows})
    got["invocations"] = _probabilities(
        {**reference.json(), "predictions": r.json()["predictions"]}
    )
    r = served.http.post(
        f"/models/{model_id}/invocations",
        json={"instances": rows, "params": {"predict_method": "predict_proba"}},
    )
    assert r.status_code == 200, r.text
    got["invocations predict_proba"] = np.asarray(r.json()["predictions"])
    client = Client(served.server.url, api_key=ADMIN_KEY)
    got["client"] = np.asarray(client.predict_proba(model_id, rows))
    bundle = load_bundle(client.export(model_id, format="bundle"))
    got["bundle"] = bundle.predict_proba(rows)
    client.close()
    for door, P in got.items():
        np.testing.assert_allclose(P, expected, rtol=0, atol=1e-9, err_msg=door)
