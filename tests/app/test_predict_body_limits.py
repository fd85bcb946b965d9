"""Issue 45: a /predict body at the JSON limit of millions of empty rows (``[], [], …``) was
parsed whole (orjson: a Python list per row, then pydantic's copy) before the row limit was
checked: with a read key, a 413 after 28.5 s and +2.0 GB of API memory. The doors that take
rows (/predict, /v2 infer, MLflow's invocations) now count the body's arrays and objects
outside its strings in C before parsing it, and refuse a body that holds more than their row
limit allows: a 413 in well under a second, costing about the body's size (measured with
tracemalloc, in process, on the real app)."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from tests.app.support import assert_problem, trained_model

# 6.7 million rows of the issue, in about 27 MB (under the 32 MiB JSON limit)
N_ROWS = 6_700_000
EMPTY_ROWS = b", ".join([b"[]"] * N_ROWS)
EMPTY_RECORDS = b", ".join([b"{}"] * N_ROWS)


def _measured(call):
    """``call()``'s answer, its seconds and its peak of traced memory, in bytes."""
    tracemalloc.start()
    try:
        start = time.perf_counter()
        answer = call()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return answer, seconds, peak


@pytest.fixture
def model_id(client, worker) -> int:
    return trained_model(client, worker)["id"]


def _bodies(model_id: int) -> dict[str, tuple[str, bytes]]:
    m = str(model_id).encode()
    v2_input = b'{"name": "input", "datatype": "FP64", "shape": [%d, 0], "data": [' % N_ROWS
    return {
        "rows of /predict": ("/predict", b'{"model_id": %s, "instances": [%s]}' % (m, EMPTY_ROWS)),
        "records of /predict": (
            "/predict", b'{"model_id": %s, "instances": [%s]}' % (m, EMPTY_RECORDS)),
        "the issue's unknown key": ("/predict", b'{"rows": [%s]}' % EMPTY_ROWS),
        "labels of /predict": (
            "/predict", b'{"model_id": %s, "instances": [[1, 2, 3]], "labels": [%s]}'
            % (m, EMPTY_ROWS)),
        "v2 nested data": (
            f"/v2/models/{model_id}/infer", b'{"inputs": [%s%s]}]}' % (v2_input, EMPTY_ROWS)),
        "MLflow instances": (
            f"/models/{model_id}/invocations", b'{"instances": [%s]}' % EMPTY_ROWS),
        "MLflow records": (
            f"/models/{model_id}/invocations", b'{"dataframe_records": [%s]}' % EMPTY_RECORDS),
    }


CASES = [
    "rows of /predict",
    "records of /predict",
    "the issue's unknown key",
    "labels of /predict",
    "v2 nested data",
    "MLflow instances",
    "MLflow records",
]


@pytest.mark.parametrize("case", CASES)
def test_a_body_of_millions_of_empty_rows_is_413_before_it_is_parsed(client, model_id, case):
    path, body = _bodies(model_id)[case]
    assert len(body) < 32 * 1024 * 1024
    headers = {"content-type": "application/json"}
    r, seconds, peak = _measured(lambda: client.post(path, content=body, headers=headers))
    assert r.status_code == 413, r.text[:500]
    assert "MSVMAV_MAX_PREDICT_INSTANCES" in r.text, r.text[:500]
    # the body itself is held once by the server, and its text without strings once more
    assert peak < 2.5 * len(body) + 16e6, (case, peak / 1e6, len(body) / 1e6)
    assert seconds < 8, (case, seconds)


def test_a_body_of_rows_within_the_limit_is_still_answered(client, model_id):
    body = b'{"model_id": %d, "instances": [%s]}' % (
        model_id, b", ".join([b"[0.5, 1.5, -2]"] * 100_000))
    r = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["predictions"]) == 100_000


def test_brackets_inside_strings_are_not_counted_as_rows(client, model_id):
    # 120,000 "[" inside one string: not rows (the model answers about its features instead)
    body = b'{"model_id": %d, "instances": [["%s", 1, 2]]}' % (model_id, b"[{" * 120_000)
    r = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert_problem(r, 422)


def test_one_row_more_than_the_limit_is_413_naming_instances(client, model_id, settings):
    n = settings.max_predict_instances + 1
    body = b'{"model_id": %d, "instances": [%s]}' % (model_id, b", ".join([b"[1, 2, 3]"] * n))
    r = client.post("/predict", content=body, headers={"content-type": "application/json"})
    body = assert_problem(r, 413)
    assert body["field"] == "instances" and f"{n} rows" in body["detail"], body
