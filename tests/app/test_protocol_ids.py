"""Prediction ids on the standard protocols, against a live ``msvmav serve`` with the prediction
log on: the Open Inference Protocol's input ``ids`` (driven by the stock ``tritonclient``) and
MLflow's ``params.ids`` (plain httpx) are echoed, default to ``"{X-Request-ID}:{row}"``, are
logged as /predict logs them (POST /feedback finds them), and a wrong one is a 400 naming the
row. Rows served through a registered model's default reference are shadow-scored like
/predict's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton
from sqlalchemy import select
from sqlalchemy.orm import Session
from tritonclient.utils import InferenceServerException

from app.core.db import make_engine
from app.monitoring.orm import PredictionLog
from tests.app.monitoring_support import settled
from tests.app.protocol_support import Served, key, predict, served_models, triton_client
from tests.app.support import wait_for


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ids")
    with served_models(database_url, tmp, MSVMAV_PREDICTION_LOG="true") as served:
        yield served


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[triton.InferenceServerClient]:
    with triton_client(served) as c:
        yield c


@pytest.fixture(scope="module")
def engine(database_url: str):
    eng = make_engine(database_url)
    yield eng
    eng.dispose()


def logged(engine, model_id: int, ids: list[str]) -> dict[str, int]:
    """prediction id -> predicted class index, of the logged rows of ``ids``."""
    with Session(engine) as session:
        rows = session.execute(
            select(PredictionLog.prediction_id, PredictionLog.predicted).where(
                PredictionLog.model_id == model_id, PredictionLog.prediction_id.in_(ids)
            )
        )
        return dict(rows.all())


def tensors(X: np.ndarray, ids: list[Any] | None, datatype: str = "BYTES") -> list[Any]:
    matrix = triton.InferInput("input", list(X.shape), "FP64")
    matrix.set_data_from_numpy(X.astype(np.float64))
    if ids is None:
        return [matrix]
    tensor = triton.InferInput("ids", [len(ids)], datatype)
    dtype = np.object_ if datatype == "BYTES" else np.int64
    tensor.set_data_from_numpy(np.array(ids, dtype=dtype))
    return [matrix, tensor]


def infer_ids(client, model: str, inputs: list[Any], **kwargs: Any) -> tuple[list[str], Any]:
    result = client.infer(model, inputs, headers={**key(), **kwargs.pop("headers", {})}, **kwargs)
    ids = result.as_numpy("id")
    return [v.decode() if isinstance(v, bytes) else str(v) for v in ids], result


# --- Open Inference Protocol ---------------------------------------------------------------------


def test_v2_ids_echoed_defaulted_and_logged(served, client, engine):
    X = served.X[:6]
    ids = [f"v2-{i}" for i in range(6)]
    got, result = infer_ids(client, str(served.binary), tensors(X, ids))
    assert got == ids
    reference = predict(served.http, served.binary, X.tolist())
    labels = [p["label"] for p in reference["predictions"]]
    assert [v.decode() for v in result.as_numpy("label")] == labels
    classes = reference["classes"]
    # Logged with their ids, each with the class /predict gives the row.
    rows = wait_for(
        lambda: (found := logged(engine, served.binary, ids)) and len(found) == 6 and found
    )
    assert [classes[rows[i]] for i in ids] == labels
    r = served.http.post(
        "/feedback", json={"model_id": served.binary, "ids": ids[:4], "labels": labels[:4]}
    )
    assert settled(r) == {"matched": 4, "unknown_ids": []}, r.text
    # Integer ids (INT64) come back as text; without ids, "{X-Request-ID}:{row}".
    got, _ = infer_ids(client, str(served.binary), tensors(X[:3], [7, 8, 2**40], "INT64"))
    assert got == ["7", "8", str(2**40)]
    got, _ = infer_ids(
        client, str(served.binary), tensors(X[:3], None), headers={"X-Request-ID": "v2r"}
    )
    assert got == ["v2r:0", "v2r:1", "v2r:2"]
    # JSON outputs too, with one tensor per column (the mixed model) and ids [n, 1].
    columns = []
    rows_mixed = served.mixed_rows[:3]
    for j, name in enumerate(served.mixed_names):
        values = [row[j] for row in rows_mixed]
        datatype = "BYTES" if isinstance(values[0], str) else "FP64"
        tensor = triton.InferInput(name, [3], datatype)
        tensor.set_data_from_numpy(
            np.array(values, dtype=np.object_ if datatype == "BYTES" else np.float64),
            binary_data=False,
        )
        columns.append(tensor)
    tensor = triton.InferInput("ids", [3, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([["a"], ["b"], ["c"]], dtype=np.object_), binary_data=False)
    outputs = [triton.InferRequestedOutput("id", binary_data=False)]
    got, result = infer_ids(client, str(served.mixed), [*columns, tensor], outputs=outputs)
    assert got == ["a", "b", "c"] and result.as_numpy("label") is None


def _error(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


def test_v2_wrong_ids_are_400_naming_the_row(served, client):
    X = served.X[:3]
    model = str(served.binary)
    cases = [
        (tensors(X, ["a", "b"]), "2 ids for 3 rows"),
        (tensors(X, ["a", "y" * 129, "c"]), "ids[1] (row 1)"),
        (tensors(X, ["a", "b", ""]), "ids[2] (row 2)"),
    ]
    fp = triton.InferInput("ids", [3], "FP64")
    fp.set_data_from_numpy(np.array([1.0, 2.0, 3.0]))
    cases.append(([tensors(X, None)[0], fp], "input 'ids' must be BYTES, INT32 or INT64"))
    only = triton.InferInput("ids", [3], "INT64")
    only.set_data_from_numpy(np.array([1, 2, 3]))
    cases.append(([only], "inputs hold only ids"))
    for inputs, expected in cases:
        error = _error(lambda inputs=inputs: client.infer(model, inputs, headers=key()))
        assert error.status() == "400" and expected in error.message(), error.message()
    # The 128-character id is fine.
    got, _ = infer_ids(client, model, tensors(X, ["a", "y" * 128, "c"]))
    assert got[1] == "y" * 128


# --- MLflow ------------------------------------------------------------------------------------


def invoke(served: Served, ref: Any, body: dict[str, Any], **kwargs: Any) -> Any:
    return served.http.post(f"/models/{ref}/invocations", json=body, **kwargs)


def test_mlflow_ids_echoed_defaulted_and_logged(served, engine):
    rows = served.X[:5].tolist()
    ids = ["m-0", 1, "m-2", 3, "m-4"]
    r = invoke(served, served.binary, {"instances": rows, "params": {"ids": ids}})
    assert r.status_code == 200, r.text
    got = r.json()["predictions"]
    assert [p["id"] for p in got] == ids
    reference = predict(served.http, served.binary, rows)
    assert [p["label"] for p in got] == [p["label"] for p in reference["predictions"]]
    found = wait_for(
        lambda: (f := logged(engine, served.binary, [str(i) for i in ids])) and len(f) == 5 and f
    )
    classes = reference["classes"]
    assert [classes[found[str(i)]] for i in ids] == [p["label"] for p in got]
    labels = [p["label"] for p in got]
    r = served.http.post(
        "/feedback", json={"model_id": served.binary, "ids": ids, "labels": labels}
    )
    assert r.json()["matched"] == 5, r.text
    r = invoke(
        served,
        served.binary,
        {"dataframe_split": {"columns": ["x0", "x1", "x2"], "data": rows[:2]}},
        headers={"X-Request-ID": "mf"},
    )
    assert [p["id"] for p in r.json()["predictions"]] == ["mf:0", "mf:1"]


def test_mlflow_wrong_ids_are_400_naming_the_row(served):
    rows = served.X[:3].tolist()
    cases = {
        "params.ids": ({"ids": ["a", "b"]}, "2 ids for 3 rows"),
        "params.ids[1]": ({"ids": ["a", "y" * 129, "c"]}, "(row 1)"),
        "params.ids[2]": ({"ids": ["a", "b", 2.5]}, "(row 2)"),
        "params.ids[0]": ({"ids": [True, "b", "c"]}, "(row 0)"),
    }
    for field, (params, expected) in cases.items():
        r = invoke(served, served.binary, {"instances": rows, "params": params})
        assert r.status_code == 400, r.text
        body = r.json()
        assert expected in body["detail"] and field in body["detail"], body
        assert body["error_code"] == "BAD_REQUEST"
        assert [e["field"] for e in body["errors"]] == [field]
    r = invoke(served, served.binary, {"instances": rows, "params": {"ids": "abc"}})
    assert r.status_code == 400 and "params.ids" in r.json()["detail"]


# --- shadow scoring through the protocols -------------------------------------------------------


def test_protocol_rows_through_the_default_reference_are_shadow_scored(served, client):
    name, http = served.name, served.http
    r = http.put(f"/registered-models/{name}/aliases/challenger", json={"version": 2})
    assert r.status_code == 200, r.text
    r = http.put(f"/registered-models/{name}/shadow", json={"alias": "challenger"})
    assert r.status_code == 200, r.text
    X = served.X[:7]
    # The V2 default (production: version 1) and MLflow's name@production: shadowed.
    infer_ids(client, name, tensors(X, [f"s-{i}" for i in range(7)]))
    r = invoke(served, f"{name}@production", {"instances": X[:4].tolist()})
    assert r.status_code == 200, r.text
    # By version, or the challenger itself: not.
    client.infer(name, tensors(X, None), model_version="1", headers=key())
    invoke(served, f"{name}/1", {"instances": X.tolist()})
    invoke(served, f"{name}@challenger", {"instances": X.tolist()})
    report = http.get(f"/registered-models/{name}/shadow").json()
    assert report["n"] == 11
    labels1 = [p["label"] for p in predict(http, served.binary, X.tolist())["predictions"]]
    labels2 = [p["label"] for p in predict(http, served.binary2, X.tolist())["predictions"]]
    same = np.array(labels1) == np.array(labels2)
    assert report["agreement"] == pytest.approx((same.sum() + same[:4].sum()) / 11)
    assert http.delete(f"/registered-models/{name}/shadow").status_code == 204
