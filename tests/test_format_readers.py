"""One reader per file format (app/ingest/readers/, issue 43): no module of ``app`` but a
format's reader module reads that format's files (for Parquet: imports ``pyarrow.parquet`` or
calls ``pandas.read_parquet``), and a whole-file read is the reader's chunks collected."""

from __future__ import annotations

import ast
import io
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

from app.ingest.readers import parquet
from tests.structure_support import TREES

#: the packages that read files (the doors' codecs and the datasets), where a format's own
#: parsing function (``json.loads`` of a line, ...) is its reader's alone
FILE_PACKAGES = ("app.ingest", "app.batch", "app.datasets", "app.predict")


@dataclass(frozen=True)
class Reader:
    """A format's one reader module; the modules only it imports, the pandas functions only
    it calls (anywhere in ``app``), the calls (``module.function``) only it makes in the
    FILE_PACKAGES, and the other places allowed one of those, each with its reason."""

    module: str
    imports: frozenset[str] = frozenset()
    pandas_calls: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()
    allowed: tuple[str, ...] = ()


READERS = {
    "parquet": Reader("app.ingest.readers.parquet", frozenset({"pyarrow.parquet"}),
                      frozenset({"read_parquet"})),
}


def _hit(node: ast.AST, name: str, reader: Reader) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name in reader.imports for a in node.names)
    if isinstance(node, ast.ImportFrom) and not node.level:
        return node.module in reader.imports or any(
            f"{node.module}.{a.name}" in reader.imports for a in node.names)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)):
        return False
    owner, called = node.func.value.id, node.func.attr
    if owner in ("pd", "pandas") and called in reader.pandas_calls:
        return True
    return name.startswith(FILE_PACKAGES) and f"{owner}.{called}" in reader.calls


def _readers_of(fmt: str) -> list[str]:
    """``module:line`` of every place in ``app`` (and ``solver``) that reads ``fmt`` itself."""
    reader = READERS[fmt]
    return [f"{name}:{node.lineno}" for name, tree in TREES.items()
            if name not in reader.allowed for node in ast.walk(tree)
            if _hit(node, name, reader)]


@pytest.mark.parametrize("fmt", sorted(READERS))
def test_only_the_formats_reader_module_reads_it(fmt):
    assert {place.split(":")[0] for place in _readers_of(fmt)} == {READERS[fmt].module}


def test_the_scan_sees_a_second_parquet_reader():
    tree = ast.parse("import pyarrow.parquet as pq\nfrom pyarrow import parquet\n"
                     "import pandas as pd\npd.read_parquet('x')\n")
    TREES["app.somewhere"] = tree
    try:
        assert _readers_of("parquet").count("app.somewhere:1") == 1
        assert {p for p in _readers_of("parquet") if p.startswith("app.somewhere")} == {
            "app.somewhere:1", "app.somewhere:2", "app.somewhere:4"}
    finally:
        del TREES["app.somewhere"]


def _parquet_bytes(n: int) -> bytes:
    rng = np.random.default_rng(0)
    table = pa.table({"x": rng.normal(size=n), "k": [f"c{i % 7}" for i in range(n)],
                      "y": rng.integers(0, 2, size=n)})
    return parquet.to_bytes(table)


def test_a_whole_parquet_read_is_its_chunks_collected():
    data = _parquet_bytes(1000)
    parts = list(parquet.chunks(data, ["x", "k"], chunk_rows=128, dictionary=["k"]))
    assert [p.num_rows for p in parts] == [128] * 7 + [104]
    whole = parquet.read(data, ["x", "k"], dictionary=["k"])
    assert whole.equals(pa.concat_tables(parts))
    assert whole.column("k").to_pandas().tolist() == [f"c{i % 7}" for i in range(1000)]
    assert pa.types.is_dictionary(whole.schema.field("k").type)


def test_an_empty_parquet_read_keeps_the_columns_asked_for():
    data = parquet.to_bytes(pa.table({"x": pa.array([], pa.float64()),
                                      "y": pa.array([], pa.int64())}))
    assert parquet.read(io.BytesIO(data), ["y"]).schema.names == ["y"]


def test_a_file_that_is_not_parquet_is_a_read_error_naming_the_file_field():
    try:
        parquet.open_file(b"not a parquet file at all")
    except parquet.ParquetReadError as exc:
        assert exc.field == "file" and str(exc).startswith("The file cannot be read as Parquet")
    else:
        raise AssertionError("no error")
