"""The fast path for training CSV/TSV, in chunks: pandas' C parser reads the file a chunk of rows
at a time. This first pass types every column (numbers, or the sorted categories found in the
whole file), counts the rows and spills each chunk's typed columns to a temporary file; the
caller checks the limits and builds the encoding from that; the second pass reads the spilled
chunks back and encodes each into a block of rows of the feature matrix, which the caller
stores as it comes. So neither the file's text nor the whole matrix is ever held.

``scan`` returns None, never raises for a bad file, whenever the careful reader
(``csv_format.read_csv``) must read the file instead: any missing value, short or long row,
non-finite number, odd header, parser complaint, or a column typed differently by two chunks
(numbers in one, text in another). The careful reader then reads it itself (the same result)
or explains precisely (line and column) what is wrong.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from .csv_format import plain_header, sniff_layout
from .errors import IngestError
from .text import clean_token, parse_number

CHUNK_BYTES = 8 * 1024 * 1024  # of CSV text per chunk
MIN_CHUNK_ROWS = 1000
HEAD_BYTES = 4 * 1024 * 1024  # read to sniff the delimiter and the header
QUOTE_BLOCK = 1 << 20  # read at a time to look for a quote character
_MIN_HEAD_LINES = 1100  # sniff_layout looks at 1001 records
_PARSE_ERRORS: tuple[type[BaseException], ...] = (ValueError, UnicodeError, OverflowError,
                                                  MemoryError)


@dataclass
class ColumnKind:
    name: str
    categories: set[str] | None = None  # None: numeric

    @property
    def numeric(self) -> bool:
        return self.categories is None


@dataclass
class SpilledColumn:
    """One column of one chunk in the spill file: ``count`` values of ``dtype`` (numbers, or
    codes into the chunk's own sorted ``categories``)."""

    dtype: np.dtype
    count: int
    categories: list[str] | None


@dataclass
class Scan:
    """What the first pass found. Each chunk's typed columns went to ``spill`` (a temporary
    file, in the narrowest exact dtype: 0/1 features take a byte per value) in order, so the
    second pass reads them back instead of parsing the text again."""

    source: IO[Any]
    start: int  # the source's position where the CSV starts
    names: list[str]
    kinds: list[ColumnKind]
    has_header: bool
    delimiter: str
    n_rows: int
    chunk_rows: int
    encoding: str | None
    quoted: bool  # the file holds a quote character (frame_chunks' ``quoted``)
    labels: dict[int, list[np.ndarray]] = field(default_factory=dict)  # column -> chunks
    # closed by close() (or when collected): it outlives this function by design
    spill: IO[bytes] = field(
        default_factory=lambda: tempfile.TemporaryFile(prefix="msvmav-")  # noqa: SIM115
    )
    chunks: list[list[SpilledColumn]] = field(default_factory=list)

    def frames(self) -> Iterator[Any]:
        self.source.seek(self.start)
        yield from frame_chunks(self.source, self.delimiter, self.has_header, self.chunk_rows,
                                self.encoding, quoted=self.quoted)

    def keep(self, values: np.ndarray, categories: list[str] | None) -> SpilledColumn:
        """Spill one chunk's column, already in its narrowest exact dtype (``_spill_column``)."""
        self.spill.write(memoryview(np.ascontiguousarray(values)).cast("B"))
        return SpilledColumn(values.dtype, len(values), categories)

    def spilled(self) -> Iterator[list[tuple[np.ndarray, list[str] | None]]]:
        """Each chunk's columns as the first pass typed them."""
        self.spill.seek(0)
        for columns in self.chunks:
            yield [(np.frombuffer(self.spill.read(c.count * c.dtype.itemsize), c.dtype),
                    c.categories) for c in columns]

    def close(self) -> None:
        self.spill.close()

    def label_values(self, j: int) -> np.ndarray:
        """Column ``j`` of the whole file: float64 numbers, or the stripped strings (object)."""
        parts = self.labels[j]
        return np.concatenate(parts) if parts else np.empty(0)


def _narrow(values: np.ndarray) -> np.ndarray:
    """The values in the narrowest of int8/int32/float64 that holds them exactly (integers
    beyond int32 stay int64: the encoder converts them to float64 as float64 would hold them)."""
    if values.dtype.kind == "f" and len(values):
        for dtype, limit in ((np.int8, 127), (np.int32, 2**31 - 1)):
            if np.abs(values).max() <= limit:
                narrow = values.astype(dtype)
                if np.array_equal(narrow, values) and not np.signbit(values[narrow == 0]).any():
                    return narrow
                break
        return values
    if values.dtype.kind == "i" and len(values):
        low, high = values.min(), values.max()
        for dtype in (np.int8, np.int32):
            if np.iinfo(dtype).min <= low and high <= np.iinfo(dtype).max:
                return values.astype(dtype)
    return values


def _spill_column(series: Any) -> tuple[np.ndarray, list[str] | None] | None:
    """``typed_column``'s answer with the values in their narrowest exact dtype (``_narrow``).
    A column the C parser typed as int64 is narrowed from its integers, not from a float64
    copy of them: a third of the first pass's time on 0/1 data."""
    if series.dtype == np.int64:
        return _narrow(series.to_numpy()), None
    typed = typed_column(series)
    return None if typed is None else (_narrow(typed[0]), typed[1])


def frame_chunks(source: IO[Any], delimiter: str, has_header: bool, chunk_rows: int,
                 encoding: str | None, *, quoted: bool = True) -> Any:
    """pandas' C parser over a CSV, ``chunk_rows`` rows a frame: the one pandas reading of CSV
    (training's chunks, /predict/file's plain CSV). ``quoted=False`` for text known to hold no
    quote: spaces after a delimiter then need no skipping (they only matter before a quoted
    field; numbers and the stripped categories are the same), which takes a quarter less time."""
    import pandas as pd

    # Exact tokens, no NA guessing: the careful reader decides what is missing.
    return pd.read_csv(source, sep=delimiter, header=0 if has_header else None,
                       na_filter=False, keep_default_na=False, skipinitialspace=quoted,
                       skip_blank_lines=True, engine="c", quotechar='"', doublequote=True,
                       comment=None, on_bad_lines="error", chunksize=chunk_rows,
                       encoding=encoding)


def _head(source: IO[Any], start: int, encoding: str | None) -> str | None:
    """The first HEAD_BYTES of the file as text, cut after a line; None if they hold too few
    lines to sniff the layout as the careful reader would, or do not decode."""
    source.seek(start)
    raw = source.read(HEAD_BYTES + 1)
    whole = len(raw) <= HEAD_BYTES
    if not whole:
        raw = raw[: raw.rfind(b"\n" if isinstance(raw, bytes) else "\n") + 1]
        if raw.count(b"\n" if isinstance(raw, bytes) else "\n") < _MIN_HEAD_LINES:
            return None
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode(encoding or "utf-8")
    except UnicodeDecodeError:
        return None


def _holds_quote(source: IO[Any], start: int) -> bool:
    """Whether the file holds a quote character anywhere after ``start``: one pass of memchr,
    ~20 ms for a 200 MB upload (in the page cache: POST /datasets has just read it for its
    checksum), where parsing without the skipping it rules out saves ~0.6 s."""
    source.seek(start)
    while block := source.read(QUOTE_BLOCK):
        if (b'"' if isinstance(block, bytes) else '"') in block:
            return True
    return False


def _chunk_rows(head: str) -> int:
    lines = max(1, head.count("\n"))
    return max(MIN_CHUNK_ROWS, int(CHUNK_BYTES / max(1.0, len(head) / lines)))


def _frame_names(frame: Any, first: list[str], has_header: bool) -> list[str] | None:
    width = frame.shape[1]
    if not has_header:
        return [f"x{j}" for j in range(width)]
    head = plain_header(first)
    # pandas reads the header itself: its names, stripped, must be the careful reader's.
    if head is None or [str(c).strip() for c in frame.columns] != head:
        return None
    return head


def _numeric(values: np.ndarray, check_underscores: bool) -> np.ndarray | None:
    try:
        out = values.astype(np.float64)  # float() per cell, as the careful reader does
    except (ValueError, TypeError):
        return None
    if not np.isfinite(out).all():
        return None  # missing (NaN, short rows) or infinite: the careful reader decides
    if check_underscores and any(isinstance(v, str) and "_" in v for v in values):
        return None  # float() reads "1_000"; the careful reader calls it text
    return out


def _categorical(values: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    import pandas as pd

    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if len(codes) and codes.min() < 0:
        return None  # a missing field (short row)
    stripped = [clean_token(u) if isinstance(u, str) else None for u in uniques]
    if any(s is None for s in stripped):
        return None  # missing values: the careful reader applies the missing policy
    if all(parse_number(s) is not None for s in stripped):  # type: ignore[arg-type]
        return None
    categories = sorted(set(stripped))  # type: ignore[arg-type]
    position = {c: i for i, c in enumerate(categories)}
    lut = np.fromiter((position[s] for s in stripped), dtype=np.int64,  # type: ignore[index]
                      count=len(stripped))
    return lut[codes], categories


def _column_values(series, check_underscores: bool) -> np.ndarray | None:
    """float64 values of a column the C parser typed as numbers; None if it did not."""
    kind = series.dtype.kind
    if kind in "if" and series.dtype.itemsize == 8:
        out = series.to_numpy(dtype=np.float64)
        return out if np.isfinite(out).all() else None
    if kind in "bu":
        return None  # "True"/"False" typed as bool, huge integers: the careful reader decides
    return _numeric(series.to_numpy(dtype=object), check_underscores)


def typed_column(series: Any, underscores: bool = True
                 ) -> tuple[np.ndarray, list[str] | None] | None:
    """(float64 values, None) for a numeric column, (int64 codes, sorted categories) for a
    text one, None when the careful reader must decide."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        return _typed_categorical(series, underscores)
    values = _column_values(series, underscores)
    if values is not None:
        return values, None
    if series.dtype.kind in "iufb":
        return None
    coded = _categorical(series.to_numpy(dtype=object))
    if coded is None:
        return None
    return coded


def _typed_categorical(series: Any, underscores: bool
                       ) -> tuple[np.ndarray, list[str] | None] | None:
    """``typed_column`` of a categorical column (a Parquet dictionary): its distinct values in
    use typed once, then mapped to the rows by their codes. Typed row by row, each row became
    its own copy of its value (twice: Arrow's, then Python's), so a 25 KB Parquet file of one
    100 KB string in 40,000 rows took an upload to 8 GB."""
    import pandas as pd

    codes = series.cat.codes.to_numpy()
    if len(codes) and codes.min() < 0:
        return None  # a missing value: the careful reader applies the missing policy
    used = np.unique(codes)
    distinct = pd.Series(np.asarray(series.cat.categories, dtype=object)[used], dtype=object)
    typed = typed_column(distinct, underscores)
    if typed is None:
        return None
    values, categories = typed
    return values[np.searchsorted(used, codes)], categories


def _merge(kind: ColumnKind, typed: tuple[np.ndarray, list[str] | None], first: bool) -> bool:
    """Fold one chunk's typing of a column into ``kind``; False when the chunks disagree."""
    _, categories = typed
    if first:
        kind.categories = None if categories is None else set(categories)
        return True
    if (categories is None) != kind.numeric:
        return False
    if categories is not None:
        kind.categories.update(categories)  # type: ignore[union-attr]
    return True


def scan(source: IO[Any], *, header: bool | None, delimiter: str | None,
         encoding: str | None = "utf-8-sig",
         label_columns: Any = None) -> Scan | None:
    """First pass over a CSV file object (binary with ``encoding``, or text with None) from its
    current position. ``label_columns(names) -> list[int]``: the columns whose values the caller
    needs whole (the label); their values are kept. None: the careful reader decides."""
    import pandas as pd

    start = source.tell()
    head = _head(source, start, encoding)
    if head is None:
        return None
    try:
        layout = sniff_layout(head, header=header, delimiter=delimiter)
    except IngestError:
        return None
    if layout is None:
        return None
    delim, has_header, records = layout
    first = records[0]
    if has_header and any(len(r) != len(first) for r in records[1:]):
        return None  # data rows longer than the header would become pandas' index
    result = Scan(source=source, start=start, names=[], kinds=[], has_header=has_header,
                  delimiter=delim, n_rows=0, chunk_rows=_chunk_rows(head), encoding=encoding,
                  quoted=_holds_quote(source, start))
    try:
        chunks_ok = all(_scan_chunk(result, f, first, label_columns) for f in result.frames())
        if chunks_ok and result.n_rows:
            return result
    except (*_PARSE_ERRORS, pd.errors.ParserError, pd.errors.EmptyDataError):
        pass
    result.close()
    return None


def _scan_chunk(result: Scan, frame: Any, first: list[str], label_columns: Any) -> bool:
    import pandas as pd

    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != result.n_rows:
        return False
    is_first = not result.kinds
    if is_first:
        if frame.shape[1] < 2:
            return False
        names = _frame_names(frame, first, result.has_header)
        if names is None:
            return False
        result.names = names
        result.kinds = [ColumnKind(n) for n in names]
        try:
            wanted = label_columns(names) if label_columns is not None else []
        except IngestError:
            wanted = []  # the caller raises it after the scan, as the careful reader would
        result.labels = {j: [] for j in wanted}
    elif frame.shape[1] != len(result.kinds):
        return False
    spilled = []
    for j, kind in enumerate(result.kinds):
        typed = _spill_column(frame.iloc[:, j])
        if typed is None or not _merge(kind, typed, is_first):
            return False
        values, categories = typed
        if j in result.labels:
            result.labels[j].append(values.astype(np.float64, copy=False) if categories is None
                                    else np.asarray(categories, dtype=object)[values])
        spilled.append(result.keep(values, categories))
    result.chunks.append(spilled)
    result.n_rows += frame.shape[0]
    return True


def encode_chunks(result: Scan, columns: list[int], categories: list[list[str] | None],
                  encode: Any) -> Iterator[Any]:
    """Second pass: ``encode(n_rows, parts)`` of each chunk, ``parts`` one (values or global
    category codes, is_categorical) per column of ``columns``, codes into ``categories[k]``."""
    positions = [None if c is None else {v: i for i, v in enumerate(c)} for c in categories]
    for typed in result.spilled():
        parts = []
        for j, position in zip(columns, positions, strict=True):
            values, local = typed[j]
            if local is not None:
                lut = np.fromiter((position[c] for c in local),  # type: ignore[index]
                                  dtype=np.int64, count=len(local))
                values = lut[values]
            parts.append((values, local is not None))
        yield encode(len(typed[0][0]), parts)
