"""A batch job's input, read a chunk of rows at a time: delimited text (CSV, TSV, whitespace),
Parquet (by row group, then sliced) and JSON Lines. Each chunk is a pandas DataFrame with the
file's column names and the 1-based line (or Parquet row) of its first row, so the worker's
memory follows the chunk, never the file."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

import numpy as np
import pandas as pd

from app.ingest import formats

InputFormat = Literal["csv", "tsv", "whitespace", "svmlight", "arff", "parquet", "jsonl"]
# the formats of the one registry (app.ingest.formats): a batch job reads every one
INPUT_FORMATS: tuple[str, ...] = formats.NAMES
_SNIFF_BYTES = 64 * 1024
PARQUET_MAGIC = formats.PARQUET_MAGIC


class FormatError(ValueError):
    """The input cannot be read as the format says (the job's error, or a 422 at submission)."""


@dataclass(frozen=True)
class Chunk:
    """Rows ``first_row`` .. of the input (0-based), the line of each (``lines``) and the share
    of the input read so far (``fraction``, for the job's progress)."""

    frame: pd.DataFrame
    first_row: int
    lines: np.ndarray
    fraction: float


def detect_format(head: bytes, filename: str, declared: str | None) -> str:
    """The format named (``declared``), else by the file's suffix, else by its first bytes
    (``app.ingest.formats.detect``: the registry every door uses)."""
    if declared:
        return declared
    return formats.detect(head, filename).name


def _delimiter(fmt: str, delimiter: str | None) -> str:
    if fmt == "whitespace" or delimiter == "whitespace":
        return r"\s+"
    if fmt == "tsv" or delimiter in ("tab", "\\t"):
        return "\t"
    return delimiter or ","


def text_chunks(source: IO[bytes], size: int, *, fmt: str, delimiter: str | None,
                header: bool, names: list[str] | None, chunk_rows: int,
                text_columns: list[str], skip_lines: int = 0) -> Iterator[Chunk]:
    """Delimited text (or a dense ARFF file's rows) in chunks of ``chunk_rows``. A blank line
    is a row of missing values (so every row's line is its line in the file, when no quoted
    field spans lines; ARFF skips blank and comment lines, so its lines are exact when the data
    section has none); the ``text_columns`` (the id and pass-through columns) are read as the
    text they hold."""
    sep = _delimiter(fmt, delimiter)
    first_line = skip_lines + (2 if header else 1)
    dtype: Any = dict.fromkeys(text_columns, str) if text_columns else None
    # ARFF's rows: after its header (``skip_lines``), '-quoted, ? missing, % comments
    arff: dict[str, Any] = ({"skiprows": skip_lines, "quotechar": "'", "comment": "%",
                             "na_values": ["?"], "skipinitialspace": True}
                            if fmt == "arff" else {})
    try:
        reader = pd.read_csv(
            source, sep=sep, header=0 if header else None, names=None if header else names,
            chunksize=chunk_rows, skip_blank_lines=sep == r"\s+" or fmt == "arff",
            dtype=dtype, keep_default_na=True, engine="c", **arff,
        )
        start = 0
        for frame in reader:
            n = len(frame)
            lines = np.arange(start + first_line, start + first_line + n)
            yield Chunk(frame, start, lines, _fraction(source, size))
            start += n
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise FormatError(f"the file cannot be read as {fmt}: {_first_line(exc)}") from None


def parquet_chunks(source: IO[bytes], chunk_rows: int) -> Iterator[Chunk]:
    """A Parquet file by record batches of at most ``chunk_rows`` (row group by row group)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(source)
        total = max(parquet.metadata.num_rows, 1)
        start = 0
        for batch in parquet.iter_batches(batch_size=chunk_rows):
            frame = batch.to_pandas()
            n = len(frame)
            yield Chunk(frame, start, np.arange(start + 1, start + 1 + n), (start + n) / total)
            start += n
    except (pa.ArrowException, OSError) as exc:
        raise FormatError(f"the file cannot be read as parquet: {_first_line(exc)}") from None


def jsonl_chunks(source: IO[bytes], size: int, chunk_rows: int) -> Iterator[Chunk]:
    """JSON Lines: one object per line, keyed by column name."""
    try:
        reader = pd.read_json(source, lines=True, chunksize=chunk_rows, dtype=False)
        start = 0
        for frame in reader:
            n = len(frame)
            lines = np.arange(start + 1, start + 1 + n)
            yield Chunk(frame, start, lines, _fraction(source, size))
            start += n
    except ValueError as exc:
        raise FormatError(f"the file cannot be read as JSON Lines: {_first_line(exc)}") from None


def read_chunks(source: IO[bytes], size: int, *, fmt: str, delimiter: str | None,
                header: bool, names: list[str] | None, chunk_rows: int,
                text_columns: list[str], skip_lines: int = 0) -> Iterator[Chunk]:
    """The input's chunks in order, each of ``chunk_rows`` rows (the last fewer)."""
    if fmt == "parquet":
        return parquet_chunks(source, chunk_rows)
    if fmt == "jsonl":
        return jsonl_chunks(source, size, chunk_rows)
    return text_chunks(source, size, fmt=fmt, delimiter=delimiter, header=header, names=names,
                       chunk_rows=chunk_rows, text_columns=text_columns, skip_lines=skip_lines)


def head_columns(source: IO[bytes], fmt: str, delimiter: str | None, header: bool
                 ) -> list[str]:
    """The input's column names (or, headerless, its first row's width as ``0, 1, ...``)
    from its first bytes (Parquet: its schema); the source is left at its start."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return list(pq.ParquetFile(source).schema_arrow.names)
        head = source.read(_SNIFF_BYTES)
        cut = head.rfind(b"\n")
        text = (head if cut < 0 else head[:cut + 1]).decode("utf-8", errors="replace")
        if fmt == "jsonl":
            first = pd.read_json(io.StringIO(text.split("\n", 1)[0]), lines=True)
            return [str(c) for c in first.columns]
        sep = _delimiter(fmt, delimiter)
        frame = pd.read_csv(io.StringIO(text), sep=sep, header=0 if header else None, nrows=1,
                            skipinitialspace=sep != r"\s+")
        return [str(c) for c in frame.columns]
    except Exception as exc:  # noqa: BLE001  (any reader's refusal is the file's fault)
        raise FormatError(f"the file cannot be read as {fmt}: {_first_line(exc)}") from None
    finally:
        source.seek(0)


def _fraction(source: IO[bytes], size: int) -> float:
    try:
        return min(source.tell() / size, 1.0) if size else 1.0
    except (OSError, ValueError):
        return 0.0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] or type(exc).__name__
