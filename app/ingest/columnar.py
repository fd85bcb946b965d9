"""Parquet and JSON Lines files as named columns, for uploads and /predict/file (Parquet read
by ``readers.parquet``, the one Parquet reader, which batch jobs and datasets by reference use
too).

Both give a ``Columns``: the file's column names, its rows, each row's line (JSON Lines) or
1-based row number (Parquet), and the columns asked for, read only then. A Parquet file's rows
and columns come from its metadata, checked against the limits before a value is decoded, and
only the columns asked for are decoded (string columns kept dictionary-encoded: a value
repeated in every row is one Python string). A JSON Lines file is read by the one JSON Lines reader
(``readers.jsonl``), a few lines at a time; its rows and every line's keys are counted against
the limits as they come (a line's keys before it is parsed).

Values become what the CSV of the same rows would give: numbers stay numbers, text the text
(stripped; "", "?", "NA", "NaN" missing, as in CSV), true/false the words "True"/"False", null
or an absent key a missing value.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, NoReturn

import numpy as np

from .errors import IngestError, IngestLimitError
from .readers import jsonl, parquet
from .table import RawTable
from .text import clean_token


@dataclass
class Columns:
    """A columnar file: ``names`` in file order, ``n_rows``, the line of each row (``lines``),
    and ``read(positions)``: those columns as pandas Series (float64 with NaN for missing
    numbers, or object/categorical text)."""

    names: list[str]
    n_rows: int
    lines: list[int]
    read: Callable[[list[int]], list[Any]]
    unit: str = "line"  # Parquet: "row" (RawTable.unit)

    def table(self, positions: list[int], series: list[Any] | None = None) -> RawTable:
        """The columns at ``positions`` (file order; ``series``: those columns already read)
        as the careful readers' RawTable of tokens (the other columns are not read)."""
        series = self.read(positions) if series is None else series
        tokens = [column_tokens(s) for s in series]
        rows = [list(r) for r in zip(*tokens, strict=True)] if tokens else []
        return RawTable(names=[self.names[j] for j in positions],
                        declared=[None] * len(positions), lines=self.lines, rows=rows,
                        has_header=True, unit=self.unit)


def arrow_numpy(values: Any) -> np.ndarray:
    """An Arrow ``Array`` or ``ChunkedArray`` as a NumPy array, copied where it must be (nulls,
    text). pyarrow 10.0.1, the declared floor, takes no argument in ``ChunkedArray.to_numpy``
    (it always copies), and an ``Array`` copies only when told."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        return values.to_numpy()
    return values.to_numpy(zero_copy_only=False)


def column_tokens(series: Any) -> list[str | None]:
    """A column as the tokens its CSV would hold (None: missing)."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        # each distinct value tokenised once, every row referring to it
        cats = [_token(c) for c in series.cat.categories]
        return [cats[k] if k >= 0 else None for k in series.cat.codes.tolist()]
    if series.dtype.kind == "f":
        return [None if math.isnan(v) else repr(v) for v in series.tolist()]
    return [_token(v) for v in series.tolist()]


def _token(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool | np.bool_):
        return "True" if value else "False"
    if isinstance(value, float | np.floating):
        return None if math.isnan(value) else repr(float(value))
    if isinstance(value, str):
        return clean_token(value)
    return str(value)


def _check_width(n: int, max_columns: int | None, where: str, row: int | None = None) -> None:
    if max_columns is not None and n > max_columns:
        raise IngestLimitError(f"{where} has {n} columns; at most {max_columns} are accepted "
                               "(MSVMAV_MAX_FEATURES and the columns a file may add).",
                               setting="max_features", row=row)


def _check_rows(n: int, max_rows: int | None, setting: str, row: int | None = None) -> None:
    if max_rows is not None and n > max_rows:
        raise IngestLimitError(f"The file has more than {max_rows} data rows"
                               f"{f' (line {row})' if row else ''}; the limit is {max_rows} "
                               f"(MSVMAV_{setting.upper()}).", setting=setting, row=row)


def read_parquet(source: IO[bytes] | bytes, *, max_rows: int | None = None,
                 max_columns: int | None = None, max_bytes: int | None = None,
                 rows_setting: str = "max_rows") -> Columns:
    """A Parquet file's ``Columns`` (read by ``readers.parquet``, the one Parquet reader): its
    schema and row count read from the metadata and checked (a duplicated column name: 422
    naming it); ``read`` decodes the columns asked for (the reader's chunks collected), after
    checking their uncompressed size (from the metadata) against ``max_bytes``."""
    import pyarrow as pa

    if isinstance(source, bytes | bytearray | memoryview):
        source = pa.BufferReader(source)
    meta = parquet.open_file(source)
    schema = meta.schema_arrow
    names = [str(n) for n in schema.names]
    _check_width(len(names), max_columns, "The Parquet file")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise IngestError(f"The Parquet file has two columns named {name!r}; column names "
                              "must be unique.", field="file", column=name)
        seen.add(name)
    n_rows = meta.metadata.num_rows
    _check_rows(n_rows, max_rows, rows_setting)

    def read(positions: list[int]) -> list[Any]:
        wanted = [names[j] for j in positions]
        for name in wanted:
            kind = schema.field(name).type
            if pa.types.is_nested(kind):
                raise IngestError(f"Parquet column {name!r} holds {kind} values; a feature "
                                  "must hold numbers or text: add it to drop.", field="file",
                                  column=name)
        _check_decoded(meta, positions, names, max_bytes)
        strings = [n for n in wanted if _is_text(schema.field(n).type)]
        table = parquet.read(source, wanted, dictionary=strings)
        return [_series(table.column(i)) for i in range(len(wanted))]

    return Columns(names=names, n_rows=n_rows, lines=list(range(1, n_rows + 1)), read=read,
                   unit="row")


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _check_decoded(meta: Any, positions: list[int], names: list[str],
                   max_bytes: int | None) -> None:
    """413 when the columns to read take more than ``max_bytes`` once decompressed."""
    if max_bytes is None:
        return
    md = meta.metadata
    paths = {md.schema.column(i).path.split(".")[0]: i for i in range(md.num_columns)}
    sizes = {names[j]: 0 for j in positions}
    for g in range(md.num_row_groups):
        group = md.row_group(g)
        for name in sizes:
            if name in paths:
                sizes[name] += group.column(paths[name]).total_uncompressed_size
    if sum(sizes.values()) > max_bytes:
        worst = max(sizes, key=sizes.__getitem__)
        raise IngestLimitError(f"The Parquet columns to read take {sum(sizes.values())} bytes "
                               f"decompressed ({worst!r} {sizes[worst]}); the limit is "
                               f"{max_bytes} (MSVMAV_MAX_ENCODED_BYTES).",
                               setting="max_encoded_bytes", column=worst)


def _series(column: Any) -> Any:
    """An Arrow column as a pandas Series: numbers as float64 (nulls NaN), dictionary text as
    a categorical, anything else as objects."""
    import pandas as pd
    import pyarrow as pa

    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return pd.Series(arrow_numpy(column).astype(np.float64, copy=False))
    if pa.types.is_dictionary(kind):
        return pd.Series(column.to_pandas())
    if pa.types.is_boolean(kind):
        return pd.Series([_token(v) for v in column.to_pylist()], dtype=object)
    return pd.Series(column.to_pylist(), dtype=object)


def read_jsonl(source: IO[bytes] | bytes, *, max_rows: int | None = None,
               max_columns: int | None = None, rows_setting: str = "max_rows") -> Columns:
    """A JSON Lines file's ``Columns``, from the one JSON Lines reader's chunks
    (``readers.jsonl``): one JSON object per line (blank lines skipped), keyed by column name;
    the columns are the keys in order of first appearance. 422 naming the line for a line that
    is not an object or holds a nested value; 413 beyond the limits."""
    if isinstance(source, bytes | bytearray | memoryview):
        source = io.BytesIO(source)
    index: dict[str, int] = {}
    values: list[_Column] = []
    lines: list[int] = []
    for chunk in jsonl.chunks(source, max_keys=max_columns, limit=_COLUMNS_LIMIT):
        for k, lineno in enumerate(chunk.lines):
            record = chunk.objects[k]
            if record is None:
                _refuse(chunk.bad[k])
            _check_rows(len(lines) + 1, max_rows, rows_setting, lineno)
            _add_record(record, lineno, len(lines), index, values, max_columns)
            lines.append(lineno)
    if not lines:
        raise IngestError("The file has no data rows.", field="file")
    names = list(index)

    def read(positions: list[int]) -> list[Any]:
        return [values[j].series() for j in positions]

    return Columns(names=names, n_rows=len(lines), lines=lines, read=read)


_COLUMNS_LIMIT = "MSVMAV_MAX_FEATURES and the columns a file may add"


def _refuse(bad: jsonl.BadRecord) -> NoReturn:
    if bad.too_wide:
        raise IngestLimitError(f"Line {bad.line}: {bad.reason}.", setting="max_features",
                               row=bad.line)
    raise IngestError(f"Line {bad.line}: {bad.reason}.", field="file", row=bad.line)


def _add_record(record: dict[str, Any], lineno: int, n: int, index: dict[str, int],
                values: list[_Column], max_columns: int | None) -> None:
    """Row ``n``'s values appended to their columns (a new key: a new column, missing in the
    rows before; a key absent: missing in this row)."""
    if tuple(record) == tuple(index) and not any(
            isinstance(v, dict | list) for v in record.values()):
        # the common line: the same keys in the same order, no nested value
        for column, value in zip(values, record.values(), strict=True):
            column.append(value)
        return
    for key, value in record.items():
        if isinstance(value, dict | list):
            raise IngestError(f"Line {lineno}: JSON key {key!r} holds a nested value; "
                              "a JSON Lines row is a flat object whose values are "
                              "numbers, text, true/false or null.",
                              field="file", row=lineno, column=key)
        j = index.get(key)
        if j is None:
            j = index[key] = len(values)
            _check_width(len(index), max_columns, f"Line {lineno}", lineno)
            values.append(_Column(n))
        values[j].append(value)
    for column in values:
        if len(column) == n:
            column.append(None)  # an absent key: missing


class _Column:
    """One JSON Lines column, built as the lines are read: while its every value is a number
    or null, a float64 NumPy buffer (NaN: missing) grown by half as it fills, with a byte per
    row saying which values were integers; from its first other value (text, true/false, an
    integer beyond float64's range) a list of the values, integers as written. A numeric
    column of n rows so holds at most 1.5 n (8 + 1) bytes, not n Python floats and their
    pointers (32 n)."""

    __slots__ = ("big", "floats", "ints", "n", "objects")

    def __init__(self, missing: int) -> None:
        size = max(16, missing + missing // 2)
        self.floats = np.full(size, np.nan)
        self.ints = np.zeros(size, dtype=np.bool_)
        self.big: dict[int, int] = {}  # integers beyond 2**53, exactly, by row
        self.n = missing  # rows before the column's first key: missing
        self.objects: list[Any] | None = None

    def __len__(self) -> int:
        return self.n if self.objects is None else len(self.objects)

    def append(self, value: Any) -> None:
        if self.objects is not None:
            self.objects.append(value)
            return
        kind = type(value)
        if (kind is not float and kind is not int and value is not None) or (
                kind is int and abs(value) > _FLOAT_INT):
            self.objects = self._values()  # text, true/false, an integer past float64
            self.objects.append(value)
            return
        if self.n == len(self.floats):
            self._grow()
        if value is not None:
            self.floats[self.n] = value
            self.ints[self.n] = kind is int
            if kind is int and abs(value) > _EXACT_INT:
                self.big[self.n] = value
        self.n += 1

    def _grow(self) -> None:
        size = self.n + self.n // 2
        floats, ints = np.full(size, np.nan), np.zeros(size, dtype=np.bool_)
        floats[: self.n], ints[: self.n] = self.floats[: self.n], self.ints[: self.n]
        self.floats, self.ints = floats, ints

    def _values(self) -> list[Any]:
        """The values so far as JSON gave them (None, int or float)."""
        out: list[Any] = self.floats[: self.n].tolist()
        for i in np.flatnonzero(self.ints[: self.n]).tolist():
            out[i] = int(out[i])
        for i in np.flatnonzero(np.isnan(self.floats[: self.n])).tolist():
            out[i] = None
        for i, value in self.big.items():
            out[i] = value
        self.floats = self.ints = np.empty(0)
        return out

    def series(self) -> Any:
        """The column as a pandas Series: float64 (NaN missing) for a numeric column, else
        text as the CSV would hold it (integers as written, true/false as words)."""
        import pandas as pd

        if self.objects is None:
            return pd.Series(self.floats[: self.n])
        return pd.Series([str(v) if isinstance(v, int) and not isinstance(v, bool)
                          else _token(v) for v in self.objects], dtype=object)


_EXACT_INT = 2**53  # a float64 holds every integer up to this exactly
_FLOAT_INT = 10**308  # and integers up to this, rounded


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] or type(exc).__name__
