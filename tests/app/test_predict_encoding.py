"""Encoder.transform_rows (bulk /predict encoding) against encode_rows, the careful per-cell
encoder: the same matrix for every input, or the same error (message, row, column)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.ingest import Encoder, IngestError, encode_rows, parse_dataset
from app.ingest.encoder import SCAN_CELLS, number_table

MIXED_CSV = (
    "a,colour,note,b,y\n"
    "1.5,red,x,2,yes\n"
    "-0.5,green,y,3,no\n"
    "2.25,blue,z,4,yes\n"
    "0.0,red,w,5,no\n"
)
NUMERIC_CSV = "a,b,c,y\n1,2,3,p\n4,5,6,q\n7,8,9,p\n"
NUMERIC_CATEGORIES_ARFF = (
    "@relation t\n@attribute a numeric\n@attribute level {1,2,10}\n@attribute y {p,q}\n"
    "@data\n1.0,1,p\n2.0,2,q\n3.0,10,p\n"
)


def _encoding(text: str, filename: str = "data.csv", **kwargs) -> dict:
    return parse_dataset(text.encode(), filename, label="y", **kwargs).encoding


def _outcome(fn, encoding, rows):
    try:
        return ("ok", fn(encoding, rows))
    except IngestError as exc:
        return ("error", (str(exc), exc.row, exc.column, exc.field))


def _assert_same(encoding: dict, rows) -> str:
    expected = _outcome(encode_rows, encoding, rows)
    got = _outcome(lambda e, r: Encoder.from_dict(e).transform_rows(r), encoding, rows)
    assert got[0] == expected[0], (rows, got, expected)
    if expected[0] == "ok":
        assert got[1].dtype == np.float64 and got[1].flags.c_contiguous
        np.testing.assert_array_equal(got[1], expected[1])
    else:
        assert got[1] == expected[1]
    return expected[0]


def test_clean_rows_take_the_bulk_path_and_match():
    enc = _encoding(MIXED_CSV, drop=["note"])
    encoder = Encoder.from_dict(enc)
    cases = [
        [[1.0, "red", 2], [0.5, "blue", -1.0], [1, "green", 0]],  # feature order
        [[1.0, "red", "anything", 2], [3, "green", None, 4.5]],  # with the dropped column
        [{"b": 1, "a": 2.5, "colour": "blue", "extra": [1]}, {"a": 0, "b": 1, "colour": "red"}],
    ]
    for rows in cases:
        assert encoder._bulk(rows) is not None, rows
        assert _assert_same(enc, rows) == "ok"
    numeric = _encoding(NUMERIC_CSV)
    rows = [[1, 2.5, 1], [-3, 0, 1e300]]
    assert Encoder.from_dict(numeric)._bulk(rows) is not None
    assert _assert_same(numeric, rows) == "ok"
    # JSON true/false among numbers: left to encode_rows, which refuses them naming the cell
    for encoding, rows in (
        (numeric, [[1, 2.5, True], [-3, 0, 1e300]]),
        (enc, [[1.0, "red", 2], [False, "blue", 0]]),
    ):
        assert Encoder.from_dict(encoding)._bulk(rows) is None
        assert _assert_same(encoding, rows) == "error"
    assert _assert_same(numeric, [{"a": 1, "b": 2, "c": 3}]) == "ok"


@pytest.mark.parametrize(
    "rows",
    [
        [[1.0, "red", None]],
        [[1.0, "red", math.nan]],
        [[1.0, "red", math.inf]],
        [[1.0, "red", "abc"]],
        [[1.0, "red", " 2.5 "]],  # a number as text: the careful path accepts it
        [[1.0, "purple", 2.0]],
        [[1.0, " red ", 2.0]],  # stripped by the careful path
        [[1.0, "?", 2.0]],
        [[1.0, 3, 2.0]],
        [[1.0, "red", 2.0], [1.0, "red"]],
        [[1.0, "red", 2.0], {"a": 1.0, "colour": "red", "b": 2.0}],
        [{"a": 1.0, "colour": "red"}],
        [[1.0, "red", 2.0], "abc"],
        [[1.0, "red", [2.0]]],
        [[1.0, ["red"], 2.0]],
        [[1.0, {"x": 1}, 2.0]],
        [[1.0, "red", 10**30]],
        [[1.0, "red", 2.0, 3.0, 4.0, 5.0]],
        [[]],
    ],
)
def test_awkward_rows_give_the_careful_answer(rows):
    _assert_same(_encoding(MIXED_CSV, drop=["note"]), rows)


def test_numeric_categories_match_by_value_like_the_careful_path():
    enc = _encoding(NUMERIC_CATEGORIES_ARFF, "data.arff")
    assert enc["columns"][1]["kind"] == "categorical", enc["columns"]
    assert Encoder.from_dict(enc)._bulk([[1.0, "10"]]) is not None
    for rows in ([[1.0, "10"]], [[1.0, 10]], [[1.0, "10.0"]], [[1.0, 3]], [[2.0, "2"]]):
        _assert_same(enc, rows)


def test_random_mixtures_of_good_and_bad_cells_agree():
    enc = _encoding(MIXED_CSV, drop=["note"])
    numeric = [0.0, -1.5, 3, True, False, None, math.nan, math.inf, "1.25", "x", [1], 10**20]
    colours = ["red", "green", "blue", "Red", " blue", "", None, 1, math.nan, ["red"]]
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(300):
        n = int(rng.integers(1, 5))
        rows = []
        for _ in range(n):
            a = numeric[rng.integers(len(numeric))]
            c = colours[rng.integers(len(colours))]
            b = numeric[rng.integers(len(numeric))]
            shape = rng.integers(4)
            if shape == 0:
                rows.append([a, c, b])
            elif shape == 1:
                rows.append([a, c, "note", b])
            elif shape == 2:
                rows.append({"a": a, "colour": c, "b": b})
            else:
                rows.append([a, c])
        outcomes.add(_assert_same(enc, rows))
    assert outcomes == {"ok", "error"}


def test_encoder_round_trips_through_json_and_encodes_every_input_kind_alike():
    """to_dict/from_dict is plain JSON (the stored format); rows, records, a float matrix and a
    parsed table encode to the same matrix as an independent one-hot of the same values."""
    import json

    from app.ingest.csv_format import read_csv

    text = "age,job,y\n30,admin.,no\n41,tech,yes\n52,admin.,no\n"
    encoding = _encoding(text)
    encoder = Encoder.from_dict(json.loads(json.dumps(Encoder.from_dict(encoding).to_dict())))
    assert encoder.to_dict() == encoding
    want = np.array([[30.0, 1, 0], [41.0, 0, 1], [52.0, 1, 0]])
    rows = [[30, "admin."], [41, "tech"], [52, "admin."]]
    records = [{"age": a, "job": j} for a, j in rows]
    np.testing.assert_array_equal(encoder.transform_rows(rows), want)
    np.testing.assert_array_equal(encoder.transform_rows(records), want)
    np.testing.assert_array_equal(encoder.encode_each(rows), want)
    table = read_csv(text)
    np.testing.assert_array_equal(encoder.transform_table(table, [0, 1, 2], [0, 1]), want)
    numeric = Encoder.from_dict(_encoding("a,b,y\n1,2,p\n3,4,q\n"))
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(numeric.transform_matrix(A), A)
    assert encoder.transform_matrix(A) is None  # categories: not a float matrix's to encode


@pytest.mark.parametrize("width", [3, 200])  # looked through cell by cell, and vectorised
def test_booleans_among_numbers_found_in_small_and_large_tables(width):
    assert (2 * width <= SCAN_CELLS) == (width == 3)
    rows = [[0.5 * j for j in range(width)], [1.0] * width]
    assert number_table(rows) is not None
    assert number_table([1, 0, 2.5], ndim=1) is not None
    assert number_table([1, False, 2.5], ndim=1) is None
    for value in (True, False):
        for i, j in ((0, 0), (1, width - 1), (0, 2)):
            hidden = [list(row) for row in rows]
            hidden[i][j] = value
            assert number_table(hidden) is None, (i, j, value)
