"""Every door into the one scoring core (app.models.scoring) answers the same, against a live
``msvmav serve`` (SQLite, and PostgreSQL when TEST_DATABASE_URL is set): a bare registered
name means one version at /predict, /v2 and invocations, and each door's numbers are
/predict's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.app.protocol_support import Served, decisions, served_models


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
