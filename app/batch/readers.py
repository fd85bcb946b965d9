"""A batch job's input, read a chunk of rows at a time: delimited text (CSV, TSV, whitespace,
dense ARFF rows), JSON Lines, svmlight and Parquet (JSON Lines and Parquet by their one
reader, ``app.ingest.readers``). The worker's memory follows the chunk and
the columns the job needs (the model's features, the id and pass-through columns), never the
file or its other columns.

Text is split into records here, line by line (a record spans lines only inside a quoted
field), so every record's line in the file is known exactly. A record that cannot be a row —
more or fewer fields than the header, not a JSON object, more keys than the column limit, a
field the tokenizer refuses — is one *bad line* (its row, line and reason), never the chunk's
or the job's failure: ``on_error`` decides what a bad line does, as for a bad cell.
"""

from __future__ import annotations

import csv
import io
import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from app.batch.formats import FormatError, text_columns
from app.ingest.columnar import arrow_numpy
from app.ingest.errors import IngestError
from app.ingest.readers import jsonl, parquet
from app.ingest.text import MISSING_TOKENS

#: The largest id or pass-through cell (bytes) a row may carry into the output: a larger one
#: makes its row bad, so a chunk's decoded pass-through columns stay within chunk_rows x this.
MAX_CELL_BYTES = 64 * 1024
_QUOTES = {"csv": b'"', "tsv": b'"', "whitespace": b'"', "arff": b"'"}


@dataclass(frozen=True)
class BadLine:
    """A record that is not a row: its 0-based data row, its file line and why."""

    row: int
    line: int
    reason: str


@dataclass
class Chunk:
    """Data rows ``first_row`` .. ``first_row + n_rows - 1`` of the input: the readable ones in
    ``frame`` (the needed columns; ``rows`` and ``lines`` give each one's data row and file
    line), the unreadable ones in ``bad``. ``extra`` holds the id and pass-through columns of
    the frame's rows with the input's types; ``X`` the rows already encoded (svmlight, a
    stored dataset), else None. ``fraction``: the share of the input read (progress)."""

    frame: pd.DataFrame
    first_row: int
    n_rows: int
    rows: np.ndarray
    lines: np.ndarray
    fraction: float
    bad: list[BadLine] = field(default_factory=list)
    extra: pa.Table | None = None
    X: Any = None


@dataclass(frozen=True)
class Layout:
    """How to read the input (the job's stored params) and what it needs from it."""

    fmt: str
    delimiter: str | None
    header: bool
    names: list[str] | None
    chunk_rows: int
    features: list[str]
    text_columns: list[str]  # the id and pass-through columns, in output order
    skip_lines: int = 0
    max_columns: int = 200_000
    encoding: dict | None = None  # the model's encoding (svmlight)


def _fraction(source: IO[bytes], size: int) -> float:
    try:
        return min(source.tell() / size, 1.0) if size else 1.0
    except (OSError, ValueError):
        return 0.0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] or type(exc).__name__


# --- records ---------------------------------------------------------------------------------

def _records(source: IO[bytes], fmt: str, start_line: int) -> Iterator[tuple[int, bytes]]:
    """(file line, record) of each data record after the first ``start_line`` lines (ARFF's
    header): a record is a line,
    or lines joined while a quoted field is open. ARFF skips blank and % comment lines,
    whitespace text and svmlight skip blank lines, CSV and TSV keep them (a row of missing
    values); a final line ending makes no record."""
    quote = _QUOTES.get(fmt)
    lineno = 0
    pending: list[bytes] = []
    first = 0
    for raw in source:
        lineno += 1
        if lineno <= start_line:
            continue
        line = raw.rstrip(b"\n").rstrip(b"\r")
        if pending:
            pending.append(line)
            if b"".join(pending).count(quote) % 2 == 0:
                yield first, b"\n".join(pending)
                pending = []
            continue
        if _skipped(line, fmt):
            continue
        if quote is not None and line.count(quote) % 2:
            pending, first = [line], lineno
            continue
        yield lineno, line
    if pending:
        yield first, b"\n".join(pending)


def _skipped(line: bytes, fmt: str) -> bool:
    if fmt == "csv" or fmt == "tsv":
        return False
    stripped = line.strip()
    if fmt == "arff":
        return not stripped or stripped.startswith(b"%")
    if fmt == "svmlight":
        return not stripped.split(b"#", 1)[0].strip()
    return not stripped


def _batches(records: Iterator[tuple[int, bytes]], n: int
             ) -> Iterator[list[tuple[int, bytes]]]:
    batch: list[tuple[int, bytes]] = []
    for rec in records:
        batch.append(rec)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _decoded(batch: list[tuple[int, bytes]], bad: dict[int, str]) -> list[str | None]:
    """Each record as text (None, and a bad line, where it is not UTF-8)."""
    try:
        return b"\n".join(r for _, r in batch).decode("utf-8").split("\n") if not any(
            b"\n" in r for _, r in batch) else [r.decode("utf-8") for _, r in batch]
    except UnicodeDecodeError:
        out: list[str | None] = []
        for k, (_, rec) in enumerate(batch):
            try:
                out.append(rec.decode("utf-8"))
            except UnicodeDecodeError:
                bad[k] = "the line is not UTF-8 text"
                out.append(None)
        return out


# --- delimited text --------------------------------------------------------------------------

def _sep(fmt: str, delimiter: str | None) -> str:
    if fmt == "whitespace" or delimiter == "whitespace":
        return r"\s+"
    if fmt == "tsv" or delimiter in ("tab", "\\t"):
        return "\t"
    if fmt == "arff":
        return ","
    return delimiter or ","


def _widths(batch: list[tuple[int, bytes]], texts: list[str | None], parser: _TextParser
            ) -> np.ndarray:
    """Each record's field count; 0 where the tokenizer decides (a quote in the record, a
    blank record, one not UTF-8). Counted in numpy over the chunk's bytes when the separator
    is one byte, so a chunk of good lines costs no Python step a line."""
    if parser.sep == r"\s+" or len(parser.sep.encode()) != 1:
        return np.asarray([0 if t is None or not t.strip() or parser.quote in t
                           else len(t.split()) for t in texts], dtype=np.int64)
    records = [r for _, r in batch]
    blob = np.frombuffer(b"\n".join(records) + b"\n", dtype=np.uint8)
    ends = np.flatnonzero(blob == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    if len(ends) != len(records):  # a record spanning lines: a quoted field, one by one
        return np.asarray([0 if t is None or parser.quote in t or not t.strip()
                           else t.count(parser.sep) + 1 for t in texts], dtype=np.int64)

    def between(positions: np.ndarray) -> np.ndarray:  # of each record
        return np.searchsorted(positions, ends) - np.searchsorted(positions, starts)

    widths = between(np.flatnonzero(blob == parser.sep.encode()[0])) + 1
    widths[between(np.flatnonzero(blob == ord(parser.quote))) > 0] = 0
    widths[ends - starts == 0] = 0
    widths[[k for k, t in enumerate(texts) if t is None]] = 0
    return widths


class _TextParser:
    """Records of delimited text to a DataFrame of ``names``: the C tokenizer on the chunk's
    records at once; where it refuses them, the bad lines are found (field counts, then
    halving: O(log chunk) tokenizer runs a bad line) and the good ones parsed at once."""

    def __init__(self, layout: Layout, names: list[str]) -> None:
        self.names = names
        self.sep = _sep(layout.fmt, layout.delimiter)
        self.quote = "'" if layout.fmt == "arff" else '"'
        self.dtype = dict.fromkeys(layout.text_columns, str) or None
        # the missing spellings of an upload's CSV (text.MISSING_TOKENS), not pandas' own
        # longer list ("NULL", "N/A", "None", ... are text, as at /predict/file)
        self.options: dict[str, Any] = (
            {"quotechar": "'", "na_values": ["?"], "skipinitialspace": True}
            if layout.fmt == "arff" else
            {"na_values": sorted(MISSING_TOKENS), "keep_default_na": False})

    def parse(self, texts: list[str]) -> pd.DataFrame:
        """The records as rows; a record of more fields than ``names`` raises (pandas only
        warns, dropping the extra fields, with ``index_col=False``)."""
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            return self._read(texts)

    def _read(self, texts: list[str]) -> pd.DataFrame:
        return pd.read_csv(io.StringIO("\n".join(texts) + "\n"), sep=self.sep, header=None,
                           names=self.names, index_col=False, dtype=self.dtype,
                           skip_blank_lines=False, engine="c",
                           **{"keep_default_na": True, **self.options})

    def frames(self, texts: list[str], keys: list[int], bad: dict[int, str]
               ) -> list[tuple[list[int], pd.DataFrame]]:
        """The records as one frame (the keys of its rows with it); records the tokenizer
        refuses are bad lines: first the quoted ones of the wrong width (the csv module
        counts their fields), then any left by halving, and the rest parsed at once."""
        try:
            return [(keys, self.parse(texts))]
        except (pd.errors.ParserError, pd.errors.ParserWarning, ValueError):
            pass
        if self.sep != r"\s+":
            reader = csv.reader([texts[i] for i in range(len(texts)) if self.quote in texts[i]],
                                delimiter=self.sep, quotechar=self.quote,
                                skipinitialspace=self.quote == "'")
            quoted = [i for i in range(len(texts)) if self.quote in texts[i]]
            for i in quoted:
                try:
                    width = len(next(reader))
                except csv.Error as exc:
                    bad[keys[i]] = f"the line cannot be read: {exc}"
                    continue
                if width != len(self.names):
                    bad[keys[i]] = (f"the line has {width} fields; the header has "
                                    f"{len(self.names)}")
        left = [i for i in range(len(texts)) if keys[i] not in bad]
        parts = self._halves([texts[i] for i in left], [keys[i] for i in left], bad)
        if len(parts) <= 1:
            return parts
        good = [i for i in left if keys[i] not in bad]
        try:
            return [([keys[i] for i in good], self.parse([texts[i] for i in good]))]
        except (pd.errors.ParserError, pd.errors.ParserWarning, ValueError):
            return parts

    def _halves(self, texts: list[str], keys: list[int], bad: dict[int, str]
                ) -> list[tuple[list[int], pd.DataFrame]]:
        if not texts:
            return []
        try:
            return [(keys, self.parse(texts))]
        except (pd.errors.ParserError, pd.errors.ParserWarning, ValueError) as exc:
            if len(texts) == 1:
                bad[keys[0]] = f"the line cannot be read: {_tokenizer_reason(exc)}"
                return []
        half = len(texts) // 2
        return (self._halves(texts[:half], keys[:half], bad)
                + self._halves(texts[half:], keys[half:], bad))


def _tokenizer_reason(exc: BaseException) -> str:
    if isinstance(exc, pd.errors.ParserWarning):
        return "the line has more fields than the header has columns"
    text = _first_line(exc)
    return re.sub(r" in line \d+", "", text.replace("Error tokenizing data. C error: ", ""))


def _header_names(line: bytes, layout: Layout) -> list[str]:
    """The header's names by the upload's rule (``app.batch.formats.text_columns``)."""
    try:
        return text_columns(line.decode("utf-8", errors="replace"),
                            _sep(layout.fmt, layout.delimiter), True)
    except IngestError as exc:
        raise FormatError(f"line {exc.row or 1}: {exc}") from None


def _drop_trailing_delimiter(texts: list[str | None], widths: np.ndarray, width: int,
                             sep: str) -> None:
    """A record of one field more than the header whose last field is blank loses it (in
    place), as the upload's careful reader tolerates a trailing delimiter on a line."""
    if sep == r"\s+":
        return
    for k in np.flatnonzero(widths == width + 1).tolist():
        text = texts[k]
        if text is not None and not text.rsplit(sep, 1)[1].strip():
            texts[k] = text.rsplit(sep, 1)[0]
            widths[k] = width


def text_chunks(source: IO[bytes], size: int, layout: Layout) -> Iterator[Chunk]:
    """Delimited text (or a dense ARFF file's rows, after its header) in chunks."""
    records = _records(source, layout.fmt, layout.skip_lines)
    names = layout.names
    if layout.header:
        head = next(records, None)
        if head is None:
            return
        names = _header_names(head[1], layout)
    assert names is not None
    parser = _TextParser(layout, names)
    wanted = list(dict.fromkeys([*layout.features, *layout.text_columns]))
    first_row = 0
    for batch in _batches(records, layout.chunk_rows):
        bad: dict[int, str] = {}
        texts = _decoded(batch, bad)
        widths = _widths(batch, texts, parser)
        _drop_trailing_delimiter(texts, widths, len(names), parser.sep)
        for k in np.flatnonzero((widths != len(names)) & (widths > 0)).tolist():
            bad[k] = f"the line has {widths[k]} fields; the header has {len(names)}"
        keys = [k for k in range(len(batch)) if k not in bad] if bad else list(
            range(len(batch)))
        parts = parser.frames([texts[k] or "" for k in keys], keys, bad) if keys else []
        good = [k for ks, _ in parts for k in ks]
        frame = (pd.concat([f[wanted] for _, f in parts], ignore_index=True) if parts
                 else pd.DataFrame({c: pd.Series(dtype=object) for c in wanted}))
        extra = _text_extra(frame, layout.text_columns)
        yield _chunk([line for line, _ in batch], first_row, good, bad, frame, extra,
                     _fraction(source, size))
        first_row += len(batch)


def _text_extra(frame: pd.DataFrame, columns: list[str]) -> pa.Table | None:
    if not columns:
        return None
    return pa.table({c: pa.Array.from_pandas(frame[c].astype(object), type=pa.string())
                     for c in dict.fromkeys(columns)})


def _chunk(record_lines: list[int], first_row: int, good: list[int], bad: dict[int, str],
           frame: pd.DataFrame, extra: pa.Table | None, fraction: float, X: Any = None
           ) -> Chunk:
    """The chunk of the records whose file lines are ``record_lines``."""
    lines = np.asarray([record_lines[k] for k in good], dtype=np.int64)
    rows = first_row + np.asarray(good, dtype=np.int64)
    bad_lines = [BadLine(first_row + k, record_lines[k], reason)
                 for k, reason in sorted(bad.items())]
    return Chunk(frame, first_row, len(record_lines), rows, lines, fraction, bad_lines, extra,
                 X)


# --- JSON Lines ------------------------------------------------------------------------------

def jsonl_chunks(source: IO[bytes], size: int, layout: Layout) -> Iterator[Chunk]:
    """JSON Lines by the one JSON Lines reader's chunks (``app.ingest.readers.jsonl``): one
    object per line, keyed by column name (a key absent is a missing value); the id and
    pass-through columns keep their JSON types. A line that is no object is a bad line."""
    wanted = list(dict.fromkeys([*layout.features, *layout.text_columns]))
    first_row = 0
    for part in jsonl.chunks(source, chunk_rows=layout.chunk_rows, max_keys=layout.max_columns):
        bad = {k: record.reason for k, record in part.bad.items()}
        objects = [o for o in part.objects if o is not None]
        good = [k for k, o in enumerate(part.objects) if o is not None]
        columns = {c: [o.get(c) for o in objects] for c in wanted}
        frame = pd.DataFrame({c: pd.Series(v, dtype=object if not v else None)
                              for c, v in columns.items()})
        for c in layout.features:  # JSON null: a missing value, as an absent key
            if frame[c].dtype == object:
                frame[c] = frame[c].where(frame[c].notna(), np.nan)
        extra = None
        if layout.text_columns:
            extra = pa.table({c: _json_array(columns[c]) for c in
                              dict.fromkeys(layout.text_columns)})
        yield _chunk(part.lines, first_row, good, bad, frame, extra, _fraction(source, size))
        first_row += len(part.lines)


def _json_array(values: list[Any]) -> pa.Array:
    """JSON values with their types (numbers, strings, booleans); text when they mix."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if v is None or isinstance(v, str) else json.dumps(v)
                         for v in values], type=pa.string())


# --- svmlight --------------------------------------------------------------------------------

def _svmlight_rows(texts: list[str], keys: list[int], encoding: dict, bad: dict[int, str]
                   ) -> list[tuple[list[int], Any]]:
    """The records' rows as CSR of the training width (bad lines found by halving, as the
    text parser does)."""
    from app.ingest import IngestError
    from app.ingest.svmlight import read_svmlight

    try:
        X, _, _ = read_svmlight("\n".join(texts) + "\n", n_features=encoding["n_features"],
                                zero_based=encoding["zero_based"])
        return [(keys, X)]
    except (IngestError, ValueError) as exc:
        if len(texts) == 1:
            bad[keys[0]] = re.sub(r"^Line \d+: ", "", _first_line(exc))
            return []
    half = len(texts) // 2
    return (_svmlight_rows(texts[:half], keys[:half], encoding, bad)
            + _svmlight_rows(texts[half:], keys[half:], encoding, bad))


def svmlight_chunks(source: IO[bytes], size: int, layout: Layout) -> Iterator[Chunk]:
    """svmlight / LIBSVM rows (the label field is read past) as the model's encoded CSR."""
    import scipy.sparse as sp

    from app.ingest import Encoder

    assert layout.encoding is not None
    encoder = Encoder.from_dict(layout.encoding)
    first_row = 0
    for batch in _batches(_records(source, "svmlight", 0), layout.chunk_rows):
        bad: dict[int, str] = {}
        texts = _decoded(batch, bad)
        keys = [k for k in range(len(batch)) if k not in bad]
        parts = _svmlight_rows([texts[k] or "" for k in keys], keys, layout.encoding,
                               bad) if keys else []
        good = [k for ks, _ in parts for k in ks]
        width = int(layout.encoding["n_features"])
        X = sp.vstack([x for _, x in parts], format="csr") if parts else sp.csr_matrix(
            (0, width))
        X = encoder.transform_sparse(X)
        finite = np.ones(X.shape[0], dtype=bool)
        for r in np.flatnonzero(~np.isfinite(X.data)):
            row = int(np.searchsorted(X.indptr, r, "right")) - 1
            if finite[row]:
                finite[row] = False
                bad[good[row]] = ("missing value" if np.isnan(X.data[r])
                                  else "infinite value")
        if not finite.all():
            X, good = X[finite], [k for k, ok in zip(good, finite, strict=True) if ok]
        frame = pd.DataFrame(index=range(len(good)))
        yield _chunk([line for line, _ in batch], first_row, good, bad, frame, None,
                     _fraction(source, size), X)
        first_row += len(batch)


# --- Parquet ---------------------------------------------------------------------------------

def parquet_chunks(source: IO[bytes], layout: Layout) -> Iterator[Chunk]:
    """A Parquet file by the one Parquet reader's chunks (``app.ingest.readers.parquet``) of at
    most ``chunk_rows``, reading only the needed columns (projected before anything is
    decoded); text id and pass-through columns stay dictionary-encoded, so a column of one
    repeated large value decodes to one value."""
    wanted = list(dict.fromkeys([*layout.features, *layout.text_columns]))
    try:
        schema = parquet.schema(source)
        textual = [c for c in layout.text_columns
                   if pa.types.is_string(schema.field(c).type)
                   or pa.types.is_large_string(schema.field(c).type)
                   or pa.types.is_binary(schema.field(c).type)]
        opened = parquet.open_file(source, dictionary=textual)
        total = max(opened.metadata.num_rows, 1)
        start = 0
        for table in parquet.chunks(opened, wanted, chunk_rows=layout.chunk_rows):
            frame = table.select(list(dict.fromkeys(layout.features))).to_pandas()
            extra = (table.select(list(dict.fromkeys(layout.text_columns)))
                     if layout.text_columns else None)
            n = len(frame)
            rows = np.arange(start, start + n)
            yield Chunk(frame, start, n, rows, rows + 1, (start + n) / total, [], extra)
            start += n
    except parquet.ParquetReadError as exc:
        raise FormatError(f"the file cannot be read as parquet: {exc.reason}") from None


def read_chunks(source: IO[bytes], size: int, layout: Layout) -> Iterator[Chunk]:
    """The input's chunks in order, each of ``chunk_rows`` data rows (the last fewer)."""
    if layout.fmt == "parquet":
        return parquet_chunks(source, layout)
    if layout.fmt == "jsonl":
        return jsonl_chunks(source, size, layout)
    if layout.fmt == "svmlight":
        return svmlight_chunks(source, size, layout)
    return text_chunks(source, size, layout)


def oversized(extra: pa.Table | None) -> dict[int, str]:
    """Positions of the rows whose id or pass-through cell is over MAX_CELL_BYTES, with the
    reason (the first such column of each row)."""
    import pyarrow.compute as pc

    out: dict[int, str] = {}
    if extra is None:
        return out
    for name in extra.column_names:
        col = extra.column(name).combine_chunks()
        kind = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
            continue
        if pa.types.is_dictionary(col.type):
            lengths = pc.binary_length(col.dictionary).take(col.indices)
        else:
            lengths = pc.binary_length(col)
        sizes = arrow_numpy(lengths)
        sizes = np.nan_to_num(np.asarray(sizes, dtype=np.float64), nan=0.0)
        for i in np.flatnonzero(sizes > MAX_CELL_BYTES).tolist():
            out.setdefault(i, f"column {name!r}: a {int(sizes[i])}-byte value; an id or "
                              f"pass-through value is at most {MAX_CELL_BYTES} bytes")
    return out
