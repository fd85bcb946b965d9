"""Issue 28, point 5: bodies a client can send that were 500s, each now a 4xx naming what is
wrong, on each database: a 401-digit integer in /predict's and invocations' rows (a 422 naming
the row and column), an ``Inference-Header-Content-Length`` of "²" and a /v2 tensor of shape
[2**63, 0] (400s)."""

from __future__ import annotations

import json

import pytest

from tests.app.support import assert_problem, trained_model

HUGE = int("9" * 401)  # beyond float64 (about 1.8e308): float() raises OverflowError


@pytest.fixture
def model_id(client, worker) -> int:
    return trained_model(client, worker)["id"]


def _huge_rows_body() -> bytes:
    # json.dumps writes the integer's 401 digits as they are
    return json.dumps([[0.5, 1.5, 2.5], [0.1, HUGE, 0.2]]).encode()


def test_a_401_digit_integer_in_predict_is_422_naming_row_and_column(client, model_id):
    body = b'{"model_id": %d, "instances": %s}' % (model_id, _huge_rows_body())
    r = client.post("/predict", content=body, headers={"Content-Type": "application/json"})
    problem = assert_problem(r, 422)
    assert "does not fit a float64" in problem["detail"], problem
    assert (problem["row"], problem["column"]) == (1, "x1"), problem


@pytest.mark.parametrize("records", [False, True], ids=["instances", "dataframe_records"])
def test_a_401_digit_integer_in_invocations_is_a_4xx(client, model_id, records):
    if records:
        rows = b'[{"x0": 0.5, "x1": %s, "x2": 0.2}]' % str(HUGE).encode()
        body = b'{"dataframe_records": %s}' % rows
    else:
        body = b'{"instances": %s}' % _huge_rows_body()
    r = client.post(
        f"/models/{model_id}/invocations", content=body,
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400, r.text  # MLflow's protocol: a bad body is a 400
    problem = r.json()
    assert "does not fit a float64" in problem["detail"], problem
    assert problem["errors"][0]["column"] == "x1", problem


def test_a_non_ascii_digit_header_length_is_400(client, model_id):
    header = json.dumps(
        {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 3], "data": [1, 2, 3]}]}
    ).encode()
    r = client.post(
        f"/v2/models/{model_id}/infer", content=header,
        headers={"Inference-Header-Content-Length": b"\xb2"},  # "²" in latin-1
    )
    assert r.status_code == 400, r.text
    assert "Inference-Header-Content-Length" in r.json()["error"]


@pytest.mark.parametrize(
    "shape", [[9223372036854775808, 0], [2**62, 2**62, 0], [1] * 40 + [0]],
    ids=["2**63", "product-overflow", "41-dimensions"],
)
def test_a_tensor_shape_beyond_numpy_is_400(client, model_id, shape):
    body = {"inputs": [{"name": "x", "datatype": "FP64", "shape": shape, "data": []}]}
    r = client.post(f"/v2/models/{model_id}/infer", json=body)
    assert r.status_code == 400, r.text
    assert "shape" in r.json()["error"]


# --- point 4: the column count from the first lines, before a CSV body is parsed ------------

LINE = b"1," * 1_000_000 + b"1"  # one 2 MB line of 1,000,001 fields


def test_a_csv_line_of_a_million_fields_is_refused_before_parsing(client, model_id):
    r = client.post(
        "/predict/file", files={"file": ("wide.csv", LINE)}, data={"model_id": model_id}
    )
    problem = assert_problem(r, 422, "file")
    assert "Line 1 has 1000001 fields, more than this model takes" in problem["detail"], problem
    assert problem["row"] == 1


def test_a_wide_second_line_is_refused_too(client, model_id):
    content = b"x0,x1,x2\n" + LINE + b"\n"
    r = client.post(
        f"/models/{model_id}/invocations", content=content, headers={"Content-Type": "text/csv"}
    )
    assert r.status_code == 400, r.text
    assert "Line 2 has 1000001 fields, more than this model takes" in r.json()["detail"], r.json()


def test_a_few_extra_columns_with_a_header_still_predict(client, model_id):
    extra = ",".join(f"note{j}" for j in range(40))
    cells = ",".join(["n"] * 40)
    content = f"id,x0,x1,x2,{extra}\r\n7,0.5,1.5,2.5,{cells}\r\n8,5.1,0.2,0.3,{cells}\r\n"
    r = client.post(
        "/predict/file", files={"file": ("ok.csv", content.encode())}, data={"model_id": model_id}
    )
    assert r.status_code == 200, r.text
    reference = client.post(
        "/predict", json={"model_id": model_id, "instances": [[0.5, 1.5, 2.5], [5.1, 0.2, 0.3]]}
    ).json()
    assert [p["label"] for p in r.json()["predictions"]] == [
        p["label"] for p in reference["predictions"]
    ]
