"""A batch job's input format, at submission: which format a file is (``detect_format``, the
registry's answer) and its column names from its first bytes (``head_columns``). The worker
reads the rows in chunks with ``app.batch.readers``."""

from __future__ import annotations

import io
from typing import IO, Literal

from app.ingest import formats
from app.ingest.csv_format import first_record, header_names
from app.ingest.errors import IngestError
from app.ingest.readers import jsonl, parquet

InputFormat = Literal["csv", "tsv", "whitespace", "svmlight", "arff", "parquet", "jsonl"]
# the formats of the one registry (app.ingest.formats): a batch job reads every one
INPUT_FORMATS: tuple[str, ...] = formats.NAMES
_SNIFF_BYTES = 64 * 1024
PARQUET_MAGIC = formats.PARQUET_MAGIC


class FormatError(ValueError):
    """The input cannot be read as the format says (the job's error, or a 422 at submission)."""


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


def text_columns(text: str, sep: str, header: bool) -> list[str]:
    """Delimited text's column names by the upload's header rule (``csv_format.header_names``:
    stripped, an empty one "x{j}", one given twice a 422 naming it), or, headerless, its first
    record's width as ``0, 1, ...``; the record split as the careful reader splits it."""
    record = first_record(text, "whitespace" if sep == r"\s+" else sep)
    if header:
        return header_names(record, 1)
    return [str(j) for j in range(len(record))]


def head_columns(source: IO[bytes], fmt: str, delimiter: str | None, header: bool
                 ) -> list[str]:
    """The input's column names (or, headerless, its first row's width as ``0, 1, ...``)
    from its first bytes (Parquet: its schema); the source is left at its start."""
    try:
        if fmt == "parquet":
            return list(parquet.schema(source).names)
        head = source.read(_SNIFF_BYTES)
        cut = head.rfind(b"\n")
        text = (head if cut < 0 else head[:cut + 1]).decode("utf-8", errors="replace")
        if fmt == "jsonl":
            first = jsonl.first_object(io.BytesIO(text.encode()))
            if isinstance(first, jsonl.BadRecord):
                raise FormatError(f"the file cannot be read as jsonl: line {first.line}: "
                                  f"{first.reason}")
            return [str(c) for c in first]
        return text_columns(text, _delimiter(fmt, delimiter), header)
    except FormatError:
        raise
    except IngestError as exc:
        raise FormatError(f"the file cannot be read as {fmt}: {exc}") from None
    except parquet.ParquetReadError as exc:
        raise FormatError(f"the file cannot be read as parquet: {exc.reason}") from None
    except Exception as exc:  # noqa: BLE001  (any reader's refusal is the file's fault)
        raise FormatError(f"the file cannot be read as {fmt}: {_first_line(exc)}") from None
    finally:
        source.seek(0)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] or type(exc).__name__
