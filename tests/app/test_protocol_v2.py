"""The Open Inference Protocol (KServe V2) driven by the stock ``tritonclient.http`` client
against a live ``msvmav serve`` (SQLite, and PostgreSQL when TEST_DATABASE_URL is set): health,
metadata and inference with binary tensors (the client's default) and JSON tensors; decisions
equal /predict's."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton
from fastapi.testclient import TestClient
from tritonclient.utils import InferenceServerException

from app.core.config import Settings
from app.main import create_app
from tests.app.protocol_support import (
    Served,
    decisions,
    key,
    predict,
    served_models,
    triton_client,
)


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_models(database_url, tmp_path_factory.mktemp("v2")) as served:
        yield served


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[triton.InferenceServerClient]:
    with triton_client(served) as c:
        yield c


def matrix_input(X: np.ndarray, *, binary: bool = True, datatype: str = "FP64") -> Any:
    dtype = {"FP64": np.float64, "FP32": np.float32, "INT64": np.int64}[datatype]
    tensor = triton.InferInput("input", list(X.shape), datatype)
    tensor.set_data_from_numpy(X.astype(dtype), binary_data=binary)
    return tensor


def json_outputs() -> list[Any]:
    return [triton.InferRequestedOutput(n, binary_data=False) for n in ("label", "decision")]


def test_health_is_open_and_reflects_readiness(served, client):
    assert client.is_server_live() is True  # no key: open, like /livez
    assert client.is_server_ready() is True
    metadata = client.get_server_metadata(headers=key())
    assert metadata["name"] == "msvmav" and "binary_tensor_data" in metadata["extensions"]


def test_model_metadata_describes_inputs_and_outputs(served, client):
    meta = client.get_model_metadata(str(served.binary), headers=key())
    assert meta["inputs"] == [{"name": "input", "datatype": "FP64", "shape": [-1, 3]}]
    assert meta["outputs"] == [
        {"name": "label", "datatype": "BYTES", "shape": [-1]},
        {"name": "decision", "datatype": "FP64", "shape": [-1]},
        {"name": "margin", "datatype": "FP64", "shape": [-1]},
        {"name": "id", "datatype": "BYTES", "shape": [-1]},
        {"name": "probability", "datatype": "FP64", "shape": [-1, 2]},  # (calibrated: sigmoid)
    ]
    multi = client.get_model_metadata(str(served.multi), headers=key())
    assert multi["outputs"][0]["datatype"] == "INT64"
    assert multi["outputs"][1]["shape"] == [-1, 3]
    mixed = client.get_model_metadata(str(served.mixed), headers=key())
    assert [(i["name"], i["datatype"]) for i in mixed["inputs"]] == [
        ("x0", "FP64"),
        ("color", "BYTES"),
        ("x1", "FP64"),
    ]
    assert client.is_model_ready(str(served.binary), headers=key()) is True
    assert client.is_model_ready("999999", headers=key()) is False


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_binary_model_equals_predict(served, client, binary):
    X = served.X
    reference = predict(served.http, served.binary, X.tolist())
    outputs = None if binary else json_outputs()  # None: the client asks for binary outputs
    result = client.infer(
        str(served.binary), [matrix_input(X, binary=binary)], outputs=outputs, headers=key()
    )
    decision = result.as_numpy("decision")
    assert decision.shape == (len(X),)
    np.testing.assert_allclose(decision, decisions(reference), rtol=0, atol=1e-9)
    labels = [v.decode() if isinstance(v, bytes) else v for v in result.as_numpy("label")]
    assert labels == [p["label"] for p in reference["predictions"]]
    assert set(labels) == {"neg", "pos"}  # both classes occur: the comparison is not vacuous
    assert (result.get_response()["outputs"][0].get("parameters") is not None) is binary


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_one_vs_rest_model_equals_predict(served, client, binary):
    X = served.X
    reference = predict(served.http, served.multi, X.tolist())
    outputs = None if binary else json_outputs()
    result = client.infer(
        str(served.multi), [matrix_input(X, binary=binary)], outputs=outputs, headers=key()
    )
    decision = result.as_numpy("decision")
    assert decision.shape == (len(X), 3)
    np.testing.assert_allclose(decision, decisions(reference), rtol=0, atol=1e-9)
    labels = result.as_numpy("label").tolist()
    assert labels == [p["label"] for p in reference["predictions"]]
    # the label is the class of the largest one-vs-rest score (an independent check)
    assert labels == [[1, 2, 3][i] for i in decision.argmax(axis=1)]


@pytest.mark.parametrize("datatype", ["FP32", "INT64"])
def test_infer_takes_fp32_and_int64(served, client, datatype):
    X = np.round(served.X * 3) if datatype == "INT64" else served.X
    cast = X.astype(np.float32).astype(np.float64) if datatype == "FP32" else X
    reference = predict(served.http, served.binary, cast.tolist())
    result = client.infer(str(served.binary), [matrix_input(X, datatype=datatype)], headers=key())
    np.testing.assert_allclose(result.as_numpy("decision"), decisions(reference), atol=1e-9)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_one_tensor_per_column_with_bytes_categories(served, client, binary):
    rows = served.mixed_rows
    reference = predict(served.http, served.mixed, rows)
    inputs = []
    for j, name in enumerate(served.mixed_names):
        column = [r[j] for r in rows]
        if name == "color":
            tensor = triton.InferInput(name, [len(rows), 1], "BYTES")
            tensor.set_data_from_numpy(np.array(column, dtype=object)[:, None], binary_data=binary)
        else:
            tensor = triton.InferInput(name, [len(rows)], "FP64")
            tensor.set_data_from_numpy(np.array(column, dtype=np.float64), binary_data=binary)
        inputs.append(tensor)
    outputs = None if binary else json_outputs()
    result = client.infer(str(served.mixed), inputs, outputs=outputs, headers=key())
    np.testing.assert_allclose(result.as_numpy("decision"), decisions(reference), atol=1e-9)
    labels = [v.decode() if isinstance(v, bytes) else v for v in result.as_numpy("label")]
    assert labels == [p["label"] for p in reference["predictions"]]


def test_requested_outputs_and_request_id(served, client):
    result = client.infer(
        str(served.binary),
        [matrix_input(served.X)],
        outputs=[triton.InferRequestedOutput("decision")],
        request_id="req-7",
        headers=key(),
    )
    response = result.get_response()
    assert [o["name"] for o in response["outputs"]] == ["decision"]
    assert response["id"] == "req-7" and response["model_name"] == str(served.binary)
    assert result.as_numpy("label") is None


def _error(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def test_errors_reach_the_client_as_the_protocol_says(served, client):
    X = served.X
    unknown = _error(lambda: client.infer("999999", [matrix_input(X)], headers=key()))
    assert unknown.status() == "404" and "999999" in unknown.message()
    meta = _error(lambda: client.get_model_metadata("no-such-model", headers=key()))
    assert meta.status() == "404" and "no-such-model" in meta.message()
    narrow = _error(
        lambda: client.infer(str(served.binary), [matrix_input(X[:, :2])], headers=key())
    )
    assert narrow.status() == "400" and "has 2 values; expected 3" in narrow.message()
    bad = np.array(X)
    bad[4, 1] = np.nan
    missing = _error(lambda: client.infer(str(served.binary), [matrix_input(bad)], headers=key()))
    assert missing.status() == "400" and "rows[4], column 'x1': missing" in missing.message()
    anonymous = _error(lambda: client.infer(str(served.binary), [matrix_input(X)]))
    assert anonymous.status() == "401" and "Authorization: Bearer" in anonymous.message()
    outputs = [triton.InferRequestedOutput("probabilities")]
    wrong = _error(
        lambda: client.infer(str(served.binary), [matrix_input(X)], outputs=outputs, headers=key())
    )
    assert wrong.status() == "400" and "probabilities" in wrong.message()
    version = _error(
        lambda: client.get_model_metadata(str(served.binary), model_version="2", headers=key())
    )
    assert version.status() == "404"


def _raw_infer(served: Served, body: bytes, header_length: int | str | None) -> dict:
    headers = (
        {} if header_length is None else {"Inference-Header-Content-Length": str(header_length)}
    )
    r = served.http.post(f"/v2/models/{served.binary}/infer", content=body, headers=headers)
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["error"] == body["detail"] and body["status"] == r.status_code
    return body


def test_malformed_binary_requests_get_400_naming_the_fault(served):
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "input",
                    "datatype": "FP64",
                    "shape": [2, 3],
                    "parameters": {"binary_data_size": 48},
                }
            ]
        }
    ).encode()
    data = np.arange(6, dtype="<f8").tobytes()
    assert "binary_data_size" in _raw_infer(served, header + data[:40], len(header))["error"]
    assert "add up to" in _raw_infer(served, header + data + b"x", len(header))["error"]
    assert "Inference-Header-Content-Length" in _raw_infer(served, header + data, "x1")["error"]
    assert "Inference-Header-Content-Length" in _raw_infer(served, header, 10**9)["error"]
    assert "not JSON" in _raw_infer(served, header + data, None)["error"]
    strings = json.dumps(
        {
            "inputs": [
                {
                    "name": "color",
                    "datatype": "BYTES",
                    "shape": [2],
                    "parameters": {"binary_data_size": 9},
                }
            ]
        }
    ).encode()
    truncated = struct.pack("<I", 3) + b"red" + struct.pack("<I", 9)[:2]
    assert "length-prefixed" in _raw_infer(served, strings + truncated, len(strings))["error"]
    json_body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": [2, 3], "data": [1]}]}
    assert "1 values" in _raw_infer(served, json.dumps(json_body).encode(), None)["error"]
    too_many = {"inputs": [{"name": "input", "datatype": "FP64", "shape": [10**6, 3], "data": []}]}
    body = _raw_infer(served, json.dumps(too_many).encode(), None)
    assert "0 values" in body["error"]


def test_registered_names_versions_and_aliases(served, client):
    X = served.X
    production = predict(served.http, served.binary, X.tolist())
    newest = predict(served.http, served.binary2, X.tolist())
    assert not np.allclose(decisions(production), decisions(newest))  # two different models
    meta = client.get_model_metadata(served.name, headers=key())
    assert meta["name"] == served.name and meta["versions"] == ["1", "2"]  # every version
    for name, version, reference in [
        (served.name, "", production),
        (served.name, "2", newest),
        (served.name, "1", production),
        (f"{served.name}@production", "", production),
    ]:
        result = client.infer(name, [matrix_input(X)], model_version=version, headers=key())
        np.testing.assert_allclose(result.as_numpy("decision"), decisions(reference), atol=1e-9)
        assert result.get_response()["model_name"] == name
    assert client.is_model_ready(served.name, model_version="2", headers=key()) is True
    missing = _error(
        lambda: client.get_model_metadata(served.name, model_version="7", headers=key())
    )
    assert missing.status() == "404" and "no version 7" in missing.message()
    unknown = _error(lambda: client.infer("nobody", [matrix_input(X)], headers=key()))
    assert unknown.status() == "404" and "'nobody' not found" in unknown.message()


def test_server_ready_follows_the_database(tmp_path):
    """/v2/health/ready answers as /readyz: 503 (with the protocol's error) on a database
    that is not migrated, while /v2/health/live stays 200."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}", _env_file=None)
    with TestClient(create_app(settings)) as c:
        assert c.get("/v2/health/live").json() == {"live": True}
        ready, readyz = c.get("/v2/health/ready"), c.get("/readyz")
        assert ready.status_code == readyz.status_code == 503
        assert ready.json()["error"] == readyz.json()["detail"]


def test_rows_beyond_the_limit_are_413_before_predicting(served, database_url):
    settings = Settings(database_url=database_url, max_predict_instances=5, _env_file=None)
    body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": [6, 3], "data": [0.0] * 18}]}
    with TestClient(create_app(settings)) as c:
        r = c.post(f"/v2/models/{served.binary}/infer", json=body)
        assert r.status_code == 413 and "MSVMAV_MAX_PREDICT_INSTANCES" in r.json()["error"]
        body["inputs"][0]["shape"], body["inputs"][0]["data"] = [5, 3], [0.0] * 15
        assert c.post(f"/v2/models/{served.binary}/infer", json=body).status_code == 200
