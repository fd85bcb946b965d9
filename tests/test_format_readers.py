"""One reader per file format (app/ingest/readers/, issue 43): no module of ``app`` but a
format's reader module reads that format's files (for Parquet: imports ``pyarrow.parquet`` or
calls ``pandas.read_parquet``), and a whole-file read is the reader's chunks collected."""

from __future__ import annotations

import ast
import io
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

from app.ingest.readers import jsonl, parquet
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
    "jsonl": Reader("app.ingest.readers.jsonl", pandas_calls=frozenset({"read_json"}),
                    calls=frozenset({"json.loads", "orjson.loads"}),
                    # a whole JSON document refused (it reads nothing: a 422); /predict's
                    # request body (not a file)
                    allowed=("app.ingest.dataset", "app.predict.fast_path")),
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


def test_the_scan_sees_a_second_json_lines_reader_in_a_file_package():
    TREES["app.batch.elsewhere"] = ast.parse("import json\nfor raw in f:\n json.loads(raw)\n")
    TREES["app.core.elsewhere"] = ast.parse("import json\njson.loads(body)\n")
    try:
        assert [p for p in _readers_of("jsonl") if "elsewhere" in p] == [
            "app.batch.elsewhere:3"]
    finally:
        del TREES["app.batch.elsewhere"], TREES["app.core.elsewhere"]


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


# --- JSON Lines ---------------------------------------------------------------------------------

_JSONL = b'{"a": 1, "b": "x"}\n\n{"a": 2.5, "b": null}\n[1, 2]\n{"a": 3}\n{"a": \n'


def test_a_json_lines_chunk_gives_each_records_line_and_object_or_reason():
    parts = list(jsonl.chunks(io.BytesIO(_JSONL), chunk_rows=2))
    assert [p.lines for p in parts] == [[1, 3], [4, 5], [6]]
    assert parts[0].objects == [{"a": 1, "b": "x"}, {"a": 2.5, "b": None}]
    assert parts[1].objects[1] == {"a": 3} and parts[1].objects[0] is None
    assert parts[1].bad[0].reason == "the line is an array, not a JSON object of column values"
    assert parts[2].bad[0].reason.startswith("the line is not valid JSON")
    whole = list(jsonl.chunks(io.BytesIO(_JSONL)))
    assert [k for p in whole for k in p.lines] == [k for p in parts for k in p.lines]


def test_an_upload_and_a_batch_job_refuse_a_json_line_for_the_same_reason():
    """One reader: the upload's 422 and the batch job's bad line say the same of line 4."""
    from app.batch.readers import Layout, read_chunks
    from app.ingest import IngestError
    from app.ingest.columnar import read_jsonl

    with pytest.raises(IngestError) as refused:
        read_jsonl(_JSONL)
    layout = Layout(fmt="jsonl", delimiter=None, header=True, names=None, chunk_rows=10,
                    features=["a"], text_columns=["b"])
    (chunk,) = read_chunks(io.BytesIO(_JSONL), len(_JSONL), layout)
    assert [(b.line, b.reason) for b in chunk.bad][0] == (4, refused.value.message[
        len("Line 4: "):-1])
    assert refused.value.row == 4 and chunk.frame["a"].tolist() == [1, 2.5, 3]


def test_a_json_line_of_too_many_keys_is_refused_before_it_is_parsed_at_both_doors():
    from app.ingest import IngestLimitError
    from app.ingest.columnar import read_jsonl

    wide = (b'{"a": 1}\n' + json.dumps({f"k{j}": j for j in range(5000)}).encode() + b"\n")
    (chunk,) = jsonl.chunks(io.BytesIO(wide), max_keys=100)
    assert chunk.bad[1].too_wide and "more than 100 keys" in chunk.bad[1].reason
    with pytest.raises(IngestLimitError) as refused:
        read_jsonl(wide, max_columns=100)
    assert refused.value.row == 2 and refused.value.setting == "max_features"
