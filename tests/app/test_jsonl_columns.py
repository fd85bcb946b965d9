"""JSON Lines columns are built as typed arrays while the file is read (app.ingest.columnar):
a numeric column is float64 from the start, not a list of Python floats converted at the end,
so reading costs a bounded multiple of the float64 columns; text and mixed columns keep their
values as the CSV of the same rows would give them (integers as written, even past 2**53)."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np

from app.ingest.columnar import read_jsonl

ROWS, COLS = 20_000, 20


def _numeric_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(ROWS, COLS))
    path = tmp_path / "wide.jsonl"
    with path.open("w") as f:
        for row in X:
            f.write(json.dumps({f"x{j}": float(v) for j, v in enumerate(row)}) + "\n")
    return path, X


def test_numeric_columns_are_float64_and_reading_costs_a_bounded_multiple_of_them(tmp_path):
    path, X = _numeric_file(tmp_path)
    with path.open("rb") as f:
        tracemalloc.start()
        try:
            columns = read_jsonl(f)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    typed = X.nbytes  # the float64 columns themselves
    # a Python float and its list slot are 32 bytes, 4x a float64: the lists peaked near 4.1x
    # (plus the rows' line numbers); the buffers grow by half, so at most 2.5 (8 + 1) / 8 of
    # the columns while one grows, and the line numbers (a Python int and slot, 36 bytes a row)
    bound = 3 * typed + 64 * ROWS
    assert peak <= bound, (peak, bound, typed)
    series = columns.read(list(range(COLS)))
    assert all(s.dtype == np.float64 for s in series)
    np.testing.assert_array_equal(np.column_stack([s.to_numpy() for s in series]), X)
    assert columns.lines == list(range(1, ROWS + 1))


def test_mixed_and_missing_values_read_as_the_csv_would_hold_them():
    big = 2**53 + 1  # a float64 rounds it to 2**53
    lines = [{"a": 1, "b": 2.5, "c": 1, "d": big},
             {"a": None, "b": 3, "c": "x", "d": "y"},
             {"b": 1e300, "c": True, "e": 7},
             {"a": 4.0, "b": None, "c": 2.0, "d": 3}]
    content = "\n".join(json.dumps(r) for r in lines).encode() + b"\n\n"
    columns = read_jsonl(content)
    assert columns.names == ["a", "b", "c", "d", "e"] and columns.lines == [1, 2, 3, 4]
    a, b, c, d, e = columns.read([0, 1, 2, 3, 4])
    assert a.dtype == np.float64 and np.array_equal(a, [1, np.nan, np.nan, 4], equal_nan=True)
    assert b.dtype == np.float64 and np.array_equal(b, [2.5, 3, 1e300, np.nan], equal_nan=True)
    assert e.dtype == np.float64 and np.array_equal(e, [np.nan, np.nan, 7, np.nan],
                                                    equal_nan=True)
    assert c.tolist() == ["1", "x", "True", "2.0"]  # an integer as written, a float by repr
    assert d.tolist() == [str(big), "y", None, "3"]  # exact past 2**53


def test_an_integer_past_float64_makes_its_column_text_not_an_error():
    content = b'{"a": 1}\n{"a": ' + str(10**400).encode() + b"}\n"
    (a,) = read_jsonl(content).read([0])
    assert a.tolist() == ["1", str(10**400)]
