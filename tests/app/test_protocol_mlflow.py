"""MLflow's scoring protocol at POST /models/{ref}/invocations against a live ``msvmav serve``
(SQLite, and PostgreSQL when TEST_DATABASE_URL is set): the four JSON shapes and text/csv give
/predict's predictions; a malformed body is a 400, another content type a 415 (problem+json
with MLflow's error_code)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.main import create_app
from tests.app.protocol_support import Served, decisions, predict, served_models


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_models(database_url, tmp_path_factory.mktemp("mlflow")) as served:
        yield served


def invoke(served: Served, model_id: int, **kwargs: Any) -> Any:
    return served.http.post(f"/models/{model_id}/invocations", **kwargs)


def predictions(served: Served, model_id: int, **kwargs: Any) -> list[dict[str, Any]]:
    r = invoke(served, model_id, **kwargs)
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"predictions"}
    return r.json()["predictions"]


def assert_same(got: list[dict[str, Any]], reference: dict[str, Any]) -> None:
    assert [p["label"] for p in got] == [p["label"] for p in reference["predictions"]]
    np.testing.assert_allclose(
        decisions({"predictions": got}), decisions(reference), rtol=0, atol=1e-9
    )


def frames(served: Served) -> list[tuple[int, pd.DataFrame]]:
    numeric = pd.DataFrame(served.X, columns=["x0", "x1", "x2"])
    mixed = pd.DataFrame(served.mixed_rows, columns=served.mixed_names)
    return [(served.binary, numeric), (served.multi, numeric), (served.mixed, mixed)]


def test_every_json_shape_gives_predicts_answer(served):
    for model_id, frame in frames(served):
        rows = frame.to_numpy(dtype=object).tolist()
        reference = predict(served.http, model_id, rows)
        assert len({p["label"] for p in reference["predictions"]}) > 1  # not one class only
        split = json.loads(frame.to_json(orient="split", index=False))
        shapes = {
            "dataframe_split": split,
            "dataframe_records": frame.to_dict(orient="records"),
            "instances": rows,
            "inputs": frame.to_dict(orient="list"),
        }
        for key, value in shapes.items():
            assert_same(predictions(served, model_id, json={key: value}), reference)
        # records in the instances key, and columns in another order
        shuffled = frame[frame.columns[::-1]].to_dict(orient="records")
        assert_same(predictions(served, model_id, json={"instances": shuffled}), reference)
        assert_same(predictions(served, model_id, json={"inputs": rows, "params": {}}), reference)


def test_csv_gives_predicts_answer(served):
    for model_id, frame in frames(served):
        reference = predict(served.http, model_id, frame.to_numpy(dtype=object).tolist())
        text = frame.to_csv(index=False)
        got = predictions(
            served, model_id, content=text, headers={"content-type": "text/csv; charset=utf-8"}
        )
        assert_same(got, reference)


def mlflow_problem(r, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["message"] == body["detail"]
    assert body["error_code"] == ("RESOURCE_DOES_NOT_EXIST" if status == 404 else "BAD_REQUEST")
    return body


def test_malformed_bodies_are_400_naming_the_fault(served):
    m = served.binary
    cases = {
        b"{not json": "not valid JSON",
        b"[1, 2]": "JSON object",
        b'{"rows": [[1, 2, 3]]}': "exactly one of the keys",
        b'{"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]}': "exactly one of the keys",
        b'{"instances": [[1, 2, 3]], "extra": 1}': "unknown keys ['extra']",
        b'{"instances": [[1, 2, 3]], "params": {"alpha": 1}}': "no other inference parameters",
        b'{"dataframe_split": {"columns": ["x0", "x1"], "data": [[1, 2], [3]]}}': "data[1]",
        b'{"dataframe_split": [[1, 2, 3]]}': "dataframe_split must be an object",
        b'{"dataframe_records": {"x0": 1}}': "dataframe_records must be a list",
        b'{"inputs": {"x0": [1, 2], "x1": [1], "x2": [1, 2]}}': "different lengths",
        b'{"instances": []}': "holds no rows",
        b'{"instances": [[1, 2]]}': "has 2 values; expected 3",
        b'{"dataframe_records": [{"x0": 1, "x1": 2}]}': "missing key 'x2'",
    }
    for body, expected in cases.items():
        r = invoke(served, m, content=body, headers={"content-type": "application/json"})
        problem = mlflow_problem(r, 400)
        assert expected in problem["detail"], (body, problem)
    csv = invoke(served, m, content=b"x0,x1\n1,2\n", headers={"content-type": "text/csv"})
    assert "x2" in mlflow_problem(csv, 400)["detail"]
    bad_row = {"instances": [[1, 2, 3], [1, "a", 3]]}
    errors = mlflow_problem(invoke(served, m, json=bad_row), 400)["errors"]
    assert errors[0]["loc"][:2] == ["body", "instances"] and errors[0]["row"] == 1


def test_other_content_types_are_415(served):
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"content-type": content_type} if content_type else {}
        r = invoke(served, served.binary, content=b"x0,x1,x2\n1,2,3\n", headers=headers)
        problem = mlflow_problem(r, 415)
        assert "application/json" in problem["detail"] and "text/csv" in problem["detail"]


def test_unknown_model_is_404(served):
    problem = mlflow_problem(invoke(served, 999999, json={"instances": [[1, 2, 3]]}), 404)
    assert "999999" in problem["detail"]
    r = served.http.post("/models/no-such/model/invocations", json={"instances": [[1, 2, 3]]})
    assert "no-such/model" in mlflow_problem(r, 404)["detail"]


def test_dataframe_split_without_columns_is_in_training_order(served):
    X = served.X[:4]
    reference = predict(served.http, served.binary, X.tolist())
    frame = pd.DataFrame(X)
    split = json.loads(frame.to_json(orient="split", index=False))
    del split["columns"]
    assert_same(predictions(served, served.binary, json={"dataframe_split": split}), reference)
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, header=False)
    got = predictions(
        served, served.binary, content=buffer.getvalue(), headers={"content-type": "text/csv"}
    )
    assert_same(got, reference)


def test_registered_references(served):
    X = served.X
    production = predict(served.http, served.binary, X.tolist())
    newest = predict(served.http, served.binary2, X.tolist())
    for ref, reference in [
        (f"{served.name}@production", production),
        (f"{served.name}/2", newest),
        (served.name, production),  # a bare name is its production version, as on /predict
        (str(served.binary2), newest),
    ]:
        r = served.http.post(f"/models/{ref}/invocations", json={"instances": X.tolist()})
        assert r.status_code == 200, (ref, r.text)
        assert_same(r.json()["predictions"], reference)
    r = served.http.post(
        f"/models/{served.name}@staging/invocations", json={"instances": X.tolist()}
    )
    assert "no alias 'staging'" in mlflow_problem(r, 404)["detail"]


def test_rows_beyond_the_limit_are_413(served, database_url):
    settings = Settings(database_url=database_url, max_predict_instances=5, _env_file=None)
    with TestClient(create_app(settings)) as c:
        for payload in (
            {"instances": [[0.0, 0.0, 0.0]] * 6},
            {"dataframe_split": {"columns": ["x0", "x1", "x2"], "data": [[0, 0, 0]] * 6}},
            {"inputs": {"x0": [0] * 6, "x1": [0] * 6, "x2": [0] * 6}},
        ):
            r = c.post(f"/models/{served.binary}/invocations", json=payload)
            assert "MSVMAV_MAX_PREDICT_INSTANCES" in mlflow_problem(r, 413)["detail"]
        csv = "x0,x1,x2\n" + "0,0,0\n" * 6
        r = c.post(
            f"/models/{served.binary}/invocations",
            content=csv,
            headers={"content-type": "text/csv"},
        )
        assert "MSVMAV_MAX_PREDICT_INSTANCES" in mlflow_problem(r, 413)["detail"]
