"""The pandas fast path of CSV ingest agrees with the careful reader on every file.

Each file is parsed twice: by ``parse_dataset`` (the fast path, with its fallback) and by the
careful reader alone (``read_csv`` + ``_from_table``). Both must give the same matrix, labels
and encoding, or the same error.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp

from app.ingest import IngestError, csv_stream, parse_dataset
from app.ingest.csv_format import read_csv
from app.ingest.dataset import _from_table
from app.ingest.text import decode_bytes

# (file text, options, the fast path reads it itself)
CASES = [
    ("a,b,y\n1,2,x\n3,4,z\n", {}, True),
    ("a;b;y\n1.5;-2e3;1\n3;4;-1\n", {}, True),
    ("a\tb\ty\n1\tu\t1\n2\tv\t0\n3\tu\t1\n", {}, True),
    ('"age";"job";"y"\n58;"management";"no"\n44;"tech, ops";"yes"\n', {}, True),
    ("1,2,x\n3,4,z\n5,6,x\n", {}, True),  # headerless
    ("a, b , y\n 1 , u , p \n 2 , v , q \n", {}, True),  # spaces around cells
    ("a,b,y\n1,2,x\n3,4,z\n", {"label": "a"}, True),
    ("a,b,y\n1,2,x\n3,4,z\n", {"drop": ["b"]}, True),
    ("a,b,y\n1,2,x\n3,4,z\n", {"header": False}, True),
    ("k,a,y\n01,1,x\n1.0,2,z\n+1,3,x\n", {}, True),  # numbers spelled differently
    ("a,b,y\n1,2,0.5\n3,4,1.5\n", {}, True),  # float labels
    ("a,b,y\n99999999999999999999,2,x\n3,4,z\n", {}, True),  # beyond int64
    ("a,b,y\n1,,x\n3,4,z\n", {}, False),  # missing value
    ("a,b,y\n1,NA,x\n3,4,z\n", {"missing": "drop"}, False),
    ("a,b,y\n1,2\n3,4,z\n", {}, False),  # short row
    ("a,b,y\n1,2,x,9\n3,4,z,9\n", {}, False),  # every row one field longer
    ("a,b,y\n1,2,x\n3,4,z,9\n", {}, False),  # one long row
    ("a,b,y\n0,2,x,9\n1,4,z,9\n", {}, False),  # long rows that look like an index
    ("a,b,y\n" + "1,2,x\n3,4,z\n" * 1000 + "5,6,x,7\n", {}, False),  # late long row
    ("a,a,y\n1,2,x\n3,4,z\n", {}, False),  # duplicate name
    ("a,a ,y\n1,2,x\n3,4,z\n", {}, False),  # names equal once stripped (pandas keeps both)
    ("a\t,a,y\n1,2,x\n3,4,z\n", {}, False),
    ("a,,y\n1,2,x\n3,4,z\n", {}, False),  # unnamed column
    ("a,b,y\n1,inf,x\n3,4,z\n", {}, False),
    ("a,b,y\n1,1e400,x\n3,4,z\n", {}, False),
    ("a,b,y\n1,nan,x\n3,4,z\n", {}, False),
    ("a,b,y\n1_000,2,x\n3,4,z\n", {}, True),  # underscores make text
    ("a,b,y\n1,True,x\n3,False,z\n", {}, False),  # the C parser's booleans
    ("a,b,y,\n1,2,x,\n3,4,z,\n", {}, False),  # trailing delimiter everywhere
    ("a,b,y\n1,2,x\n,,\n3,4,z\n", {}, False),  # a row of empty fields
    ('a,b,y\n1,"two\nlines",x\n3,4,z\n', {}, True),  # quoted newline
    ("a,b,y\n1,2,x\n3,4,x\n", {"label": "Y"}, True),  # case-insensitive label
    # integers the C parser types as int64, narrowed from their integers: int8, int32, beyond
    # int32 (kept int64), beyond 2^53 (float64 rounds them as the careful reader's float())
    ("a,b,c,y\n-128,-2147483648,3000000000,1\n127,2147483647,-3000000000,2\n", {}, True),
    ("a,b,y\n9007199254740993,1,-1\n-9007199254740995,2,1\n", {}, True),
    ("a,b,y\n-129,1,5\n3,4,-7\n", {}, True),  # integer labels, read as float64
    # spaces after the delimiter and no quote in the file: parsed without skipping them
    ("a,  b,y\n  1,\t2.5,  x\n3,  -4,  z\n  5,6,x\n", {}, True),
    ("a,  b,y\n  1,  u,  x\n3,  v,  z\n", {"label": "b"}, True),
]


def _careful(text: str, **opts):
    header = opts.pop("header", None)
    table = read_csv(text, header=header)
    return _from_table(table, "csv", opts.get("label"), opts.get("drop"),
                       opts.get("missing", "error"))


def _fast(text: str, header: bool | None = None) -> bool:
    """Whether the chunked fast path (csv_stream) reads the file itself."""
    found = csv_stream.scan(io.StringIO(text), header=header, delimiter=None, encoding=None)
    return found is not None


def _outcome(fn):
    try:
        return fn(), None
    except IngestError as exc:
        return None, exc.to_dict()


@pytest.mark.parametrize(("text", "opts", "fast"), CASES, ids=range(len(CASES)))
def test_fast_path_matches_careful_reader(text, opts, fast) -> None:
    assert _fast(text, opts.get("header")) == fast
    _assert_same_as_careful_reader(text, opts)


def _assert_same_as_careful_reader(text: str, opts: dict) -> None:
    content = text.encode()
    got, got_err = _outcome(lambda: parse_dataset(content, "f.csv", **opts))
    want, want_err = _outcome(lambda: _careful(decode_bytes(content), **dict(opts)))
    assert got_err == want_err
    if want is None:
        return
    assert sp.issparse(got.X) == sp.issparse(want.X)
    np.testing.assert_array_equal(np.asarray(got.X.todense() if sp.issparse(got.X) else got.X),
                                  np.asarray(want.X.todense() if sp.issparse(want.X) else want.X))
    assert got.y.dtype == want.y.dtype
    np.testing.assert_array_equal(got.y, want.y)
    assert got.encoding == want.encoding
    assert got.feature_names == want.feature_names
    assert (got.classes, got.class_counts, got.n_rows_dropped) == (
        want.classes, want.class_counts, want.n_rows_dropped)


def test_fast_path_matches_on_random_mixed_file() -> None:
    rng = np.random.default_rng(3)
    n = 3000
    x = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n)
    k = rng.integers(-50, 50, n)
    cat = rng.choice(["red", "green", "blue", "dark red"], n)
    wide = np.array([f"c{v}" for v in rng.integers(0, 400, n)])
    y = rng.choice(["p", "q", "r"], n)
    lines = ["x,k,cat,wide,y"] + [f"{float(a)!r},{b},{c},{d},{e}" for a, b, c, d, e in
                                   zip(x, k, cat, wide, y, strict=True)]
    text = "\n".join(lines) + "\n"
    got = parse_dataset(text.encode(), "r.csv")
    want = _careful(text)
    assert _fast(text)
    assert sp.issparse(got.X) and sp.issparse(want.X)  # 406 wide one-hot: CSR
    assert (got.X != want.X).nnz == 0
    np.testing.assert_array_equal(got.y, want.y)
    assert got.encoding == want.encoding
    # and against an independent encoding of the same columns
    cats = sorted(set(cat))
    wides = sorted(set(wide))
    dense = np.zeros((n, 2 + len(cats) + len(wides)))
    dense[:, 0] = x
    dense[:, 1] = k
    dense[np.arange(n), 2 + np.searchsorted(cats, cat)] = 1
    dense[np.arange(n), 2 + len(cats) + np.searchsorted(wides, wide)] = 1
    np.testing.assert_array_equal(got.X.toarray(), dense)


@pytest.mark.parametrize("text", [
    "a,b\n" * 10,
    "x" * 20_000 + "\n" + "1,2\r\n" * 100,
    "\n\n" + ("1,2\n\n" * 3000),
    "a,b",
    "é;ü\r" * 5000,
])
def test_first_lines_reads_only_a_prefix_but_agrees_with_splitlines(text) -> None:
    from app.ingest.csv_format import _first_lines

    assert _first_lines(text, 50) == [s for s in text.splitlines() if s.strip()][:50]


@pytest.mark.parametrize(("text", "opts", "fast"), CASES, ids=range(len(CASES)))
def test_fast_path_in_chunks_of_two_rows_matches_careful_reader(text, opts, fast, monkeypatch):
    """Read two rows at a time, the fast path still agrees: categories found in every chunk,
    a column typed as numbers in one chunk and text in another goes to the careful reader."""
    monkeypatch.setattr(csv_stream, "CHUNK_BYTES", 1)
    monkeypatch.setattr(csv_stream, "MIN_CHUNK_ROWS", 2)
    _assert_same_as_careful_reader(text, opts)


@pytest.mark.parametrize("rows", [
    ["1,a,p", "2,b,q", "3,c,p", "4,a,q"],  # categories spread over chunks
    ["1,a,p", "2,b,q", "x,c,p", "4,a,q"],  # numbers, then text: careful reader
    ["1,a,1", "2,b,2", "3,c,x", "4,a,y"],  # label numbers, then text
])
def test_chunks_with_different_values_agree_with_careful_reader(rows, monkeypatch):
    monkeypatch.setattr(csv_stream, "CHUNK_BYTES", 1)
    monkeypatch.setattr(csv_stream, "MIN_CHUNK_ROWS", 2)
    text = "k,c,y\n" + "\n".join(rows) + "\n"
    got = parse_dataset(text.encode(), "f.csv")
    want = _careful(text)
    np.testing.assert_array_equal(np.asarray(got.X), np.asarray(want.X))
    np.testing.assert_array_equal(got.y, want.y)
    assert got.y.dtype == want.y.dtype and got.encoding == want.encoding


@pytest.mark.parametrize(("text", "quoted"), [
    ("a,b,y\n1,2,x\n3,4,z\n", False),
    ('a,b,y\n1,2,x\n3,4,"z"\n', True),
    ("a,b,y\n" + "1,2,x\n" * 60_000 + '3,4,"z, w"\n', True),  # a quote only after the head
])
def test_the_scan_skips_spaces_after_delimiters_only_where_a_quote_may_follow(text, quoted):
    """pandas' skipinitialspace (a quarter of the parse) only matters before a quoted field:
    the scan parses a file without any quote character without it, and the result is still
    the careful reader's."""
    for source in (io.StringIO(text), io.BytesIO(text.encode())):
        found = csv_stream.scan(source, header=None, delimiter=None,
                                encoding=None if isinstance(source, io.StringIO) else "utf-8")
        assert found is not None and found.quoted is quoted
        found.close()
    _assert_same_as_careful_reader(text, {})


def test_an_int64_column_is_spilled_narrow_without_a_float_copy(monkeypatch):
    """A column the C parser typed as int64 goes straight to its narrowest dtype; typed_column
    (the float64 conversion) is not called for it, and the label's values are float64."""
    import pandas as pd

    calls = []
    original = csv_stream.typed_column
    monkeypatch.setattr(csv_stream, "typed_column",
                        lambda series, *a: calls.append(series.name) or original(series, *a))
    frame = pd.DataFrame({"a": np.array([0, 1, -128], dtype=np.int64),
                          "b": np.array([0, 2**31 - 1, -(2**31)], dtype=np.int64),
                          "c": np.array([0, 2**31, 1], dtype=np.int64),
                          "d": [0.5, 1.0, 2.0]})
    got = {name: csv_stream._spill_column(frame[name]) for name in frame}
    assert calls == ["d"]
    assert [got[n][0].dtype for n in "abcd"] == [np.int8, np.int32, np.int64, np.float64]
    for name in frame:
        np.testing.assert_array_equal(got[name][0], frame[name].to_numpy())
    found = csv_stream.scan(io.StringIO("a,b,y\n1,2,7\n3,4,-7\n"), header=None,
                            delimiter=None, encoding=None, label_columns=lambda names: [2])
    assert found.label_values(2).dtype == np.float64
    np.testing.assert_array_equal(found.label_values(2), [7.0, -7.0])
