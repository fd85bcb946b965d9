"""A registry alias's decision rule at the protocol doors of a live ``msvmav serve`` (SQLite, and
PostgreSQL when TEST_DATABASE_URL is set): /v2 through the stock tritonclient and MLflow's
invocations label every row by the rule applied to the probabilities they serve, and say which
rule made the labels."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.http as triton

from tests.app.protocol_support import Served, key, served_models, triton_client


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_models(database_url, tmp_path_factory.mktemp("rules")) as served:
        yield served


def test_v2_and_invocations_label_by_the_aliass_rule(served):
    ref = f"{served.name}@production"
    r = served.http.post(f"/models/{ref}/threshold",
                         json={"objective": {"target": "recall", "value": 0.5,
                                             "positive": "pos"}})
    assert r.status_code == 200, r.text
    t = r.json()["threshold"]
    with triton_client(served) as client:
        tensor = triton.InferInput("input", list(served.X.shape), "FP64")
        tensor.set_data_from_numpy(served.X.astype(np.float64))
        result = client.infer(ref, [tensor], headers=key())
    P = result.as_numpy("probability")
    labels = [v.decode() for v in result.as_numpy("label")]
    assert labels == np.where(P[:, 1] >= t, "pos", "neg").tolist()
    rule = result.get_response()["parameters"]["decision_rule"]
    assert rule == f"threshold P(pos) >= {t:.6g}"
    r = served.http.post(f"/models/{ref}/invocations", json={"instances": served.X.tolist()})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    p1 = np.array([p["probabilities"]["pos"] for p in preds])
    assert [p["label"] for p in preds] == np.where(p1 >= t, "pos", "neg").tolist()
    assert r.headers["x-decision-rule"] == rule
    # by the model's id: its own (default) rule, argmax
    with triton_client(served) as client:
        result = client.infer(str(served.binary), [tensor], headers=key())
    P = result.as_numpy("probability")
    assert [v.decode() for v in result.as_numpy("label")] == np.where(
        P[:, 1] > P[:, 0], "pos", "neg").tolist()
    assert result.get_response()["parameters"]["decision_rule"] == "argmax"


def test_v2_and_invocations_take_a_requests_own_rule(served):
    """A request's own threshold at /v2 (parameters, via tritonclient) and invocations (params)
    labels by it, whatever the alias's rule, as /predict's ``threshold`` does; a bad one is a
    400 naming it (they took none: the reference's rule always)."""
    ref = f"{served.name}@production"
    tensor = triton.InferInput("input", list(served.X.shape), "FP64")
    tensor.set_data_from_numpy(served.X.astype(np.float64))
    with triton_client(served) as client:
        result = client.infer(ref, [tensor], headers=key(), parameters={"threshold": 0.9})
    P = result.as_numpy("probability")
    assert [v.decode() for v in result.as_numpy("label")] == np.where(
        P[:, 1] >= 0.9, "pos", "neg").tolist()
    assert result.get_response()["parameters"]["decision_rule"] == "threshold P(pos) >= 0.9"
    r = served.http.post(f"/models/{ref}/invocations",
                         json={"instances": served.X.tolist(), "params": {"threshold": 0.9}})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    p1 = np.array([p["probabilities"]["pos"] for p in preds])
    assert [p["label"] for p in preds] == np.where(p1 >= 0.9, "pos", "neg").tolist()
    assert r.headers["x-decision-rule"] == "threshold P(pos) >= 0.9"
    body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": list(served.X.shape),
                        "data": served.X.ravel().tolist()}], "parameters": {"threshold": "high"}}
    r = served.http.post(f"/v2/models/{ref}/infer", json=body)
    assert r.status_code == 400 and "parameters.threshold" in r.json()["error"], r.text
    r = served.http.post(f"/models/{ref}/invocations",
                         json={"instances": served.X.tolist(), "params": {"decision_rule": "x"}})
    assert r.status_code == 400 and "params.decision_rule" in r.text, r.text


def test_the_client_sets_a_rule_and_overrides_it(served):
    from msvmav_client import Client
    from tests.app.protocol_support import ADMIN_KEY

    ref = f"{served.name}/2"
    with Client(served.server.url, api_key=ADMIN_KEY) as client:
        answer = client.set_threshold(ref, cost_fp=1, cost_fn=5)
        assert answer["stored_on"] == "model"  # (these 60 rows: no hold-out part)
        t = answer["threshold"]
        result = client.predict(ref, served.X.tolist())
        p1 = np.array([p["probabilities"]["pos"] for p in result["predictions"]])
        assert [p["label"] for p in result["predictions"]] == np.where(
            p1 >= t, "pos", "neg").tolist()
        assert result["decision_rule"]["source"] == "model"
        override = client.predict(ref, served.X.tolist(), threshold=0.99)
        assert [p["label"] for p in override["predictions"]] == np.where(
            p1 >= 0.99, "pos", "neg").tolist()
        assert override["decision_rule"]["source"] == "request"
        svg = client.set_threshold(ref, cost_fp=1, cost_fn=5, figure="svg")
        assert svg.lstrip().startswith(b"<?xml")
