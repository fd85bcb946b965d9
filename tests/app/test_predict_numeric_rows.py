"""Large /predict bodies whose rows are read straight into a float array
(app.predict.numeric_rows): the same answers as parsing the whole body, for valid rows and for
every kind of mistake, and the parser itself against the standard library's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.predict import numeric_rows
from app.predict.numeric_rows import NumericRows, split_body
from tests.app.support import blobs, to_csv, trained_model, upload

# The thresholds made small for the suite (about 82 kB of JSON with three features, cut into
# five slices as 2.3 MB is into three at the service's own 1 MiB): the same paths, a twenty-eighth
# of the bytes.
MIN_BYTES = 32 * 1024
CHUNK_BYTES = 16 * 1024
ROWS = 2_500


@pytest.fixture(autouse=True)
def _small_thresholds(monkeypatch):
    monkeypatch.setattr(numeric_rows, "MIN_BYTES", MIN_BYTES)
    monkeypatch.setattr(numeric_rows, "CHUNK_BYTES", CHUNK_BYTES)


def _rows(n: int = ROWS, d: int = 3, seed: int = 0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)) * 3, 6)
    rows = X.tolist()
    for i in range(0, n, 7):  # some integers among the floats
        rows[i][0] = int(round(rows[i][0]))
    return rows


def _both(client, monkeypatch, body: bytes) -> tuple:
    """The answer to ``body`` with the numeric-rows path, then with the whole body parsed."""
    headers = {"Content-Type": "application/json", "X-Request-ID": "same"}  # same default ids
    fast = client.post("/predict", content=body, headers=headers)
    with monkeypatch.context() as m:
        m.setattr(numeric_rows, "MIN_BYTES", 1 << 60)
        slow = client.post("/predict", content=body, headers=headers)
    return fast, slow


def _same(fast, slow) -> dict:
    assert fast.status_code == slow.status_code, (fast.text[:300], slow.text[:300])
    assert fast.headers["content-type"] == slow.headers["content-type"]
    got, expected = fast.json(), slow.json()
    for answer in (got, expected):
        answer.pop("request_id", None)  # (a problem's own)
    assert got == expected
    return got


@pytest.fixture
def model(client, worker) -> dict:
    return trained_model(client, worker)


def test_valid_rows_answer_as_the_whole_parse_and_the_estimator(client, monkeypatch, model, app):
    rows = _rows()
    body = json.dumps({"model_id": model["id"], "instances": rows}).encode()
    assert len(body) > numeric_rows.MIN_BYTES
    got = _same(*_both(client, monkeypatch, body))
    assert got["n"] == ROWS
    from tests.app.serving_support import _reference_decisions

    reference = _reference_decisions(app, model["id"], np.array(rows, dtype=float))
    np.testing.assert_allclose(
        [p["decision_value"] for p in got["predictions"]], reference, rtol=1e-12
    )


def test_labels_answer_as_the_whole_parse(client, worker, monkeypatch):
    X, y = blobs(n=80, seed=2)
    model = trained_model(client, worker, content=to_csv(X, y))
    labels = [str(y[i % len(y)]) for i in range(ROWS)]
    body = json.dumps({"model_id": model["id"], "labels": labels, "instances": _rows()})
    got = _same(*_both(client, monkeypatch, body.encode()))
    assert got["accuracy"] is not None and got["margins"]["n"] == ROWS


@pytest.mark.parametrize(
    "mistake",
    [
        "true",  # a boolean among the numbers
        "NaN",  # a literal orjson refuses
        "1e999",  # infinite
        '"1.5"',  # a number as text (the row encoder takes it)
        '"abc"',
        "null",
        "[1]",  # a nested array as a cell
        "{}",
        "123456789012345678901234567890",  # beyond 64 bits
    ],
)
def test_a_bad_cell_gets_the_answer_of_the_whole_parse(client, monkeypatch, model, mistake):
    rows = [json.dumps(r) for r in _rows()]
    rows[ROWS // 2] = f"[{mistake}, 1.0, 2.0]"
    body = f'{{"model_id": {model["id"]}, "instances": [{",".join(rows)}]}}'
    _same(*_both(client, monkeypatch, body.encode()))


@pytest.mark.parametrize(
    "shape",
    [
        "ragged",  # one row a value short
        "empty row",
        "trailing comma",
        "records",
        "truncated",
        "a row not a list",
        "key in labels",
        "escaped key with a decoy",
        "duplicate key",
        "two features per row",
        "invalid rows, valid rest",
    ],
)
def test_a_bad_shape_gets_the_answer_of_the_whole_parse(client, monkeypatch, model, shape):
    rows = [json.dumps(r) for r in _rows()]
    mid = model["id"]

    def wrap(before: str = "", after: str = "]}") -> str:
        return f'{{"model_id": {mid}, {before}"instances": [' + ",".join(rows) + after

    body = wrap()
    if shape == "ragged":
        rows[123] = json.dumps(_rows(1)[0][:2])
    elif shape == "empty row":
        rows[5] = "[]"
    elif shape == "a row not a list":
        rows[7] = "3.5"
    if shape in ("ragged", "empty row", "a row not a list"):
        body = wrap()
    elif shape == "trailing comma":
        body = wrap(after=",]}")
    elif shape == "records":
        records = [dict(zip(["x0", "x1", "x2"], r, strict=True)) for r in _rows()]
        body = json.dumps({"model_id": mid, "instances": records})
    elif shape == "truncated":
        body = body[: len(body) // 2]
    elif shape == "key in labels":
        body = wrap(before='"labels": ["instances"], ')
    elif shape == "escaped key with a decoy":
        # the only literal "instances" is a nested decoy; the real key is escaped
        body = wrap(before='"labels": [{', after=']}], "\\u0069nstances": [[1.0, 2.0, 3.0]]}')
    elif shape == "duplicate key":
        body = wrap(after='], "\\u0069nstances": [[1.0, 2.0, 3.0]]}')
    elif shape == "two features per row":
        body = json.dumps({"model_id": mid, "instances": [r[:2] for r in _rows()]})
    elif shape == "invalid rows, valid rest":  # the rows end inside a string: not JSON
        pad = "x" * (numeric_rows.MIN_BYTES + 10)
        body = f'{{"instances": [[1,"]] , "model_id": {mid}, "labels": ["{pad}"]}}'
    assert len(body) > numeric_rows.MIN_BYTES
    fast, slow = _both(client, monkeypatch, body.encode())
    _same(fast, slow)
    if shape == "duplicate key":  # the last key wins, as in every JSON parse here
        assert fast.status_code == 200 and fast.json()["n"] == 1


def test_too_many_rows_is_413_before_they_are_read(client, monkeypatch, model, app):
    settings = app.state.settings.model_copy(update={"max_predict_instances": 1000})
    app.state.settings = app.state.runtime.settings = settings  # (/predict reads the runtime's)
    body = json.dumps({"model_id": model["id"], "instances": _rows()}).encode()
    fast, slow = _both(client, monkeypatch, body)
    problem = _same(fast, slow)
    assert fast.status_code == 413 and f"{ROWS} rows" in problem["detail"]


def test_a_categorical_model_takes_the_usual_path(client, worker, monkeypatch):
    X, y = blobs(n=60, seed=5)
    csv = "x0,x1,colour,cls\n" + "".join(
        f"{a},{b},{'red' if i % 2 else 'blue'},{lab}\n"
        for i, ((a, b, _c), lab) in enumerate(zip(X, y, strict=True))
    )
    ds = upload(client, csv.encode())
    assert ds["n_features"] == 4
    model = trained_model(client, worker, content=csv.encode())
    rows = [[r[0], r[1], "red" if i % 3 else "blue"] for i, r in enumerate(_rows())]
    body = json.dumps({"model_id": model["id"], "instances": rows}).encode()
    got = _same(*_both(client, monkeypatch, body))
    assert got["n"] == ROWS


def test_split_body_and_matrix_agree_with_the_standard_library():
    rows = _rows(n=3_000, d=5, seed=9)
    body = json.dumps({"labels": None, "instances": rows, "model_id": 3}, indent=1).encode()
    parsed = split_body(body)
    assert parsed is not None and parsed["model_id"] == 3 and parsed["labels"] is None
    (block,) = parsed["instances"]
    assert isinstance(block, NumericRows) and block.n_rows == len(rows)
    np.testing.assert_array_equal(block.matrix(), np.array(rows, dtype=float))
    assert block.rows_list() == json.loads(body)["instances"]
    assert split_body(body[: len(body) - 1]) is None  # invalid JSON: parsed whole (and refused)
    assert split_body(json.dumps({"instances": rows[:10]}).encode()) is None  # small


def test_a_streamed_body_without_content_length_answers_the_same(client, model):
    body = json.dumps({"model_id": model["id"], "instances": _rows()}).encode()
    headers = {"Content-Type": "application/json", "X-Request-ID": "same"}  # same default ids
    whole = client.post("/predict", content=body, headers=headers)
    pieces = (body[i : i + 8192] for i in range(0, len(body), 8192))
    streamed = client.post("/predict", content=pieces, headers=headers)
    assert "content-length" not in streamed.request.headers
    assert whole.status_code == streamed.status_code == 200
    assert whole.json() == streamed.json()


@pytest.mark.parametrize(
    "fields",
    ['"model_id": "1"', '"model_id": 0', '"model_id": 1, "extra": 1', '"model_id": 1, "labels": 5',
     '"model_id": 2147483648'],
)
def test_a_bad_field_beside_large_rows_gets_the_answer_of_the_whole_parse(
    client, monkeypatch, fields
):
    rows = ",".join(json.dumps(r) for r in _rows())
    body = f'{{{fields}, "instances": [{rows}]}}'.encode()
    fast, slow = _both(client, monkeypatch, body)
    assert fast.status_code == 422
    _same(fast, slow)
