"""Prediction-time files: parse_feature_file() encodes a new file like the training data (with
the model's ``Encoder``)."""

from __future__ import annotations

import io

import numpy as np
import scipy.sparse as sp

from . import formats
from .arff import read_arff
from .column_specs import BadValueError, ColumnCoder, feature_specs, spec_width
from .columnar import Columns, column_tokens, read_jsonl, read_parquet
from .columns import resolve_label
from .csv_format import (
    _SNIFF_LINES,
    CANDIDATE_DELIMITERS,
    looks_whitespace_separated,
    plain_header,
    read_csv,
    sniff_delimiter,
    whitespace_to_tabs,
)
from .csv_stream import frame_chunks, typed_column
from .dataset import find_missing, table_missing_error
from .encoder import Encoder, number_table  # noqa: F401  (number_table: app.predict reads it here)
from .errors import MAX_ROWS_NAMED, IngestError, IngestLimitError
from .labels import convert_labels
from .limits import NO_LIMITS, Limits, check_budget, count_records
from .svmlight import check_values, read_svmlight
from .table import RawTable
from .text import decode_bytes, is_number, preview

_EVERY_FEATURE = "Every row needs all features to be predicted."
#: Columns a prediction file may have beyond the model's input columns (with a header, columns
#: that are not the model's are ignored).
MAX_EXTRA_COLUMNS = 1024
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def check_column_count(encoding: dict, content: bytes | bytearray | str) -> None:
    """Before anything is decoded or parsed: no line among the first ones the delimiter sniffer
    reads has more fields, under any candidate delimiter, than the model's input columns plus
    ``MAX_EXTRA_COLUMNS`` (IngestError naming the line). Counted in the raw bytes (or, for
    UTF-16, the decoded text) without copying them: a 10 MB line of ``1,1,1,...`` cost ~60 times
    its size once split into cells. ARFF (a first line starting with ``@`` or ``%``) and models
    trained on svmlight are left to their parsers."""
    if encoding.get("format") == "svmlight":
        return
    text = isinstance(content, str)
    if not text and content.startswith(_UTF16_BOMS):
        return  # checked on the decoded text
    limit = len(encoding.get("input_columns") or feature_specs(encoding)) + MAX_EXTRA_COLUMNS
    delims = {encoding.get("delimiter") or ",", *CANDIDATE_DELIMITERS}
    seps = list(delims) if text else [d.encode() for d in delims if len(d.encode()) == 1]
    newline, cr = ("\n", "\r") if text else (b"\n", b"\r")
    start, line, seen = 0, 0, 0
    while start < len(content) and seen < _SNIFF_LINES:
        stop = content.find(newline, start)
        stop = len(content) if stop < 0 else stop
        carriage = content.find(cr, start, stop)
        end = stop if carriage < 0 else carriage
        line += 1
        first = content[start : start + 1]
        if seen == 0 and first in (("@", "%") if text else (b"@", b"%")):
            return  # ARFF
        fields = 1 + max(content.count(sep, start, end) for sep in seps)
        seen += end > start
        if fields > limit:
            raise IngestError(
                f"Line {line} has {fields} fields, more than this model takes: at most "
                f"{limit} columns (its {limit - MAX_EXTRA_COLUMNS} input columns and up to "
                f"{MAX_EXTRA_COLUMNS} more, ignored, with a header).", field="file", row=line)
        start = end + (2 if content[end : end + 2] == cr + newline else 1)


def _svmlight_features(encoding: dict, text: str) -> tuple[sp.csr_matrix, np.ndarray]:
    if encoding.get("format") != "svmlight":
        raise IngestError(f"This model was trained on a {encoding.get('format')} file; upload "
                          "CSV or ARFF with the training columns, not svmlight.",
                          field="format")
    X, y, _ = read_svmlight(text, n_features=encoding["n_features"],
                            zero_based=encoding["zero_based"])
    check_values(text, X, "error", _EVERY_FEATURE)
    return Encoder.from_dict(encoding).transform_sparse(X), convert_labels(y)


def _map_columns(encoding: dict, table: RawTable, label: str | int | None
                 ) -> tuple[list[int], int | None]:
    """Positions in the uploaded table of each training feature column, and of the label."""
    specs = feature_specs(encoding)
    wanted = [s["name"] for s in specs]
    if table.has_header:
        index = {n: j for j, n in enumerate(table.names)}
        absent = [n for n in wanted if n not in index]
        if absent:
            raise IngestError(f"The file lacks training columns {preview(absent)}; it has "
                              f"{preview(table.names)}.", field="file", column=absent[0])
        if label is not None:
            label_idx: int | None = resolve_label(table.names, label, default=-1)
        else:
            label_idx = index.get(encoding.get("label"))  # type: ignore[arg-type]
        return [index[n] for n in wanted], label_idx
    # Headerless: positions follow the training file's column order.
    inputs: list[str] = encoding["input_columns"]
    train_label = encoding.get("label")
    width = len(table.names)
    if width == len(inputs):
        pos = {n: j for j, n in enumerate(inputs)}
        label_idx = pos.get(train_label) if train_label is not None else None
    elif width == len([n for n in inputs if n != train_label]):
        pos = {n: j for j, n in enumerate(n for n in inputs if n != train_label)}
        label_idx = None
    elif width == len(wanted):
        pos = {n: j for j, n in enumerate(wanted)}
        label_idx = None
    else:
        raise IngestError(f"The file has {width} columns; expected {len(inputs)} (as in "
                          f"training), or {len(wanted)} feature columns: {preview(wanted)}.",
                          field="file")
    if label is not None:
        label_idx = resolve_label(table.names, label, default=-1)
    return [pos[n] for n in wanted], label_idx


def parse_feature_file(encoding: dict, content: bytes, filename: str = "",
                       label: str | int | None = None, limits: Limits = NO_LIMITS
                       ) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray | None]:
    """Encode a prediction-time upload like the training data.

    Returns (X, y) where y is the label column when the file has one (the training label's
    name, or ``label``) with a value in every row, else None. Rows are never dropped (each
    needs a prediction), so missing feature values are an error, but in the columns the model
    imputes (they take its fill). A table whose encoded matrix
    would exceed ``limits.max_encoded_bytes`` (wide one-hot columns) raises IngestLimitError
    before it is built; svmlight and plain numeric CSV give matrices in proportion to the file.
    More than ``limits.max_rows`` rows: IngestLimitError, counted before the file is parsed
    (Parquet: its metadata; text without quotes: its lines) or as the reader passes the limit.
    """
    fmt = file_format(content, filename)
    if fmt in ("parquet", "jsonl"):
        columns = read_columns(encoding, content, fmt, limits)
        fast = _typed_features(encoding, columns, label)
        if fast is not None:
            return fast
        return _table_features(encoding, _columns_table(encoding, columns, label), label,
                               limits)
    text = _checked_text(encoding, content, fmt, limits)
    if fmt == "svmlight":
        return _svmlight_features(encoding, text)
    if fmt == "csv" and looks_whitespace_separated(text):
        text = whitespace_to_tabs(text)
    if fmt == "csv" and (fast := _plain_csv_features(encoding, text, label)) is not None:
        return fast
    return _table_features(encoding, _text_table(encoding, text, fmt, limits), label, limits)


def file_format(content: bytes, filename: str = "") -> str:
    """The reader of a prediction file (``formats``): by extension, else Parquet's magic, else
    the content (UTF-16 text decoded first)."""
    found = formats.by_extension(filename)
    if found is not None:
        return found.reader
    head = bytes(content[:formats.SNIFF_BYTES])
    if head.startswith(_UTF16_BOMS):
        head = decode_bytes(content)[:formats.SNIFF_BYTES]  # type: ignore[assignment]
    return formats.by_content(head).reader


def _checked_text(encoding: dict, content: bytes, fmt: str, limits: Limits) -> str:
    """The text of a text file, after the column and row counts it cannot exceed are checked
    on its bytes (so a refused file is never decoded)."""
    check_column_count(encoding, content)
    if limits.max_rows is not None and not content.startswith(_UTF16_BOMS) and (
            fmt == "svmlight" or (fmt == "csv" and b'"' not in content)):
        # (quoted fields may span lines: the reader counts those rows as it reads them)
        header = 1 if fmt == "csv" else 0
        n = count_records(content, b"#" if fmt == "svmlight" else None) - header
        check_file_rows(n, limits.max_rows)
    text = decode_bytes(content)
    if not isinstance(content, str) and content.startswith(_UTF16_BOMS):
        check_column_count(encoding, text)
    if not text or text.isspace():  # (not text.strip(): no copy of a large upload)
        raise IngestError("The file is empty.", field="file")
    return text


def check_file_rows(n_rows: int, max_rows: int | None) -> None:
    """413 for a file of more than ``max_rows`` data rows (counted before it is parsed)."""
    if max_rows is not None and n_rows > max_rows:
        raise IngestLimitError(f"The file has {n_rows} data rows; at most {max_rows} are "
                               "accepted (MSVMAV_MAX_PREDICT_INSTANCES).",
                               setting="max_predict_instances")


def _text_table(encoding: dict, text: str, fmt: str, limits: Limits) -> RawTable:
    if fmt == "csv":
        return read_csv(text, preferred_delimiter=encoding.get("delimiter"),
                        known_names={s["name"] for s in feature_specs(encoding)},
                        max_rows=limits.max_rows)
    return read_arff(text, max_attributes=_column_limit(encoding), max_rows=limits.max_rows)


def _column_limit(encoding: dict) -> int:
    return len(encoding.get("input_columns") or feature_specs(encoding)) + MAX_EXTRA_COLUMNS


def read_columns(encoding: dict, content: bytes, fmt: str, limits: Limits) -> Columns:
    """A Parquet or JSON Lines prediction file's columns, rows and widths checked first."""
    if fmt == "parquet":
        return read_parquet(content, max_rows=limits.max_rows,
                            max_columns=_column_limit(encoding),
                            max_bytes=limits.max_encoded_bytes,
                            rows_setting="max_predict_instances")
    return read_jsonl(content, max_rows=limits.max_rows, max_columns=_column_limit(encoding),
                      rows_setting="max_predict_instances")


def _columns_table(encoding: dict, columns: Columns, label: str | int | None) -> RawTable:
    """The model's columns (and the label's, if any) of a columnar file as a RawTable; the
    other columns are not read."""
    wanted = {s["name"] for s in feature_specs(encoding)}
    index = {n: j for j, n in enumerate(columns.names)}
    absent = [n for n in wanted if n not in index]
    if absent:
        raise IngestError(f"The file lacks training columns {preview(sorted(absent))}; it has "
                          f"{preview(columns.names)}.", field="file", column=sorted(absent)[0])
    label_idx = _label_position(encoding, columns.names, label)
    used = sorted({index[n] for n in wanted} | ({label_idx} if label_idx is not None else set()))
    return columns.table(used)


def _label_position(encoding: dict, names: list[str], label: str | int | None) -> int | None:
    if label is not None:
        return resolve_label(names, label, default=-1)
    return {n: j for j, n in enumerate(names)}.get(encoding.get("label"))  # type: ignore[arg-type]


def _typed_features(encoding: dict, columns: Columns, label: str | int | None
                    ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A columnar file whose model features are all numeric and present in every row: its
    numbers encoded as they are (``Encoder.transform_columns``); None for anything else."""
    encoder = Encoder.from_dict(encoding)
    index = {n: j for j, n in enumerate(columns.names)}
    if not encoder.names or not encoder.plain_numeric or any(
            n not in index for n in encoder.names):
        return None
    try:
        label_idx = _label_position(encoding, columns.names, label)
    except IngestError:
        return None
    col_ids = [index[n] for n in encoder.names]
    if label_idx is not None and label_idx in col_ids:
        return None
    series = columns.read(col_ids)
    typed = [typed_column(s) for s in series]
    if any(t is None or t[1] is not None for t in typed):
        return None
    y = None
    if label_idx is not None:
        (label_series,) = columns.read([label_idx])
        tokens = column_tokens(label_series)
        if any(t is None for t in tokens):
            return None  # (an empty label: the careful path says which rows)
        y = convert_labels(tokens)  # type: ignore[arg-type]
    return encoder.transform_columns(columns.n_rows, [t[0] for t in typed], sparse=False), y


def _table_features(encoding: dict, table: RawTable, label: str | int | None, limits: Limits
                    ) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray | None]:
    """``parse_feature_file``'s answer for a file the careful readers parsed."""
    specs = feature_specs(encoding)
    col_ids, label_idx = _map_columns(encoding, table, label)
    if label_idx is not None and label_idx in col_ids:
        raise IngestError(f"Column {table.names[label_idx]!r} is a feature of this model and "
                          "cannot be the label.", field="label")
    # a missing cell of an imputed column takes its fill (app.ingest.imputation)
    required = [j for j, spec in zip(col_ids, specs, strict=True)
                if "fill" not in spec.get("impute", {})]
    bad = find_missing(table, required)
    if bad:
        raise table_missing_error(table, bad, _EVERY_FEATURE)
    width = sum(spec_width(s) for s in specs)
    check_budget(table.n_rows, len(col_ids), width, False, limits)  # encoded dense below
    all_rows = list(range(table.n_rows))
    X = Encoder.from_dict(encoding).transform_table(table, all_rows, col_ids)
    y = None
    if label_idx is not None:
        tokens = table.column(label_idx, all_rows)
        absent = [i for i, t in enumerate(tokens) if t is None]
        if len(absent) < len(tokens):
            if absent:
                shown = ", ".join(str(table.lines[i]) for i in absent[:MAX_ROWS_NAMED])
                raise IngestError(f"The label column {table.names[label_idx]!r} is empty in "
                                  f"{len(absent)} rows ({table.unit}s {shown}); fill every "
                                  "label or none.", field="label", row=table.lines[absent[0]],
                                  column=table.names[label_idx])
            y = convert_labels(tokens)  # type: ignore[arg-type]
    return X, y


def _plain_csv_features(encoding: dict, text: str, label: str | int | None
                        ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """parse_feature_file's answer for the plainest CSV, read by the pandas reader training's
    chunks use (``frame_chunks``, ``typed_column``) and encoded by the Encoder: a header naming
    every (numeric) training feature, no blank line, no quotes, every cell of every column
    present (so no row is short), every feature value a finite number. None for anything
    else, which the careful parser then reads (and explains when it fails): this path never
    produces an error of its own and, where it answers, answers the same.
    """
    encoder = Encoder.from_dict(encoding)
    if not encoder.names or not encoder.plain_numeric or '"' in text:
        return None
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None  # a lone carriage return: the careful parser decides
    blank = text.find("\n\n")
    if text.startswith("\n") or (blank >= 0 and text[blank:].strip("\n")):
        return None  # blank lines (but the last): the careful parser decides
    # The delimiter the careful parser picks (sniff_delimiter reads only the first lines).
    delim = sniff_delimiter(text, encoding.get("delimiter"))
    end = text.find("\n")
    after = text.find("\n", end + 1)
    row = text[end + 1:] if after < 0 else text[end + 1:after]
    if end < 0 or row.count(delim) != text.count(delim, 0, end):
        return None  # no row, or a first row longer than the header (pandas' index) or short
    names = plain_header(text[:end].split(delim))
    if names is None or len(names) < 2 or any(is_number(n) for n in names):
        return None
    index = {n: j for j, n in enumerate(names)}
    if any(n not in index for n in encoder.names):
        return None
    try:
        label_idx = (resolve_label(names, label, default=-1) if label is not None
                     else index.get(encoding.get("label")))  # type: ignore[arg-type]
    except IngestError:
        return None
    col_ids = [index[n] for n in encoder.names]
    if label_idx is not None and label_idx in col_ids:
        return None
    columns = _plain_csv_columns(text, delim, len(names))
    if columns is None or any(columns[j][1] is not None for j in col_ids):
        return None  # a feature that is not numbers: the careful parser decides
    y = None
    if label_idx is not None:
        values, categories = columns[label_idx]
        y = convert_labels(values) if categories is None else np.asarray(categories)[values]
    return encoder.transform_columns(len(columns[0][0]), [columns[j][0] for j in col_ids],
                                     sparse=False), y


def _plain_csv_columns(text: str, delim: str, width: int
                       ) -> list[tuple[np.ndarray, list[str] | None]] | None:
    """Every column of a plain CSV with a header of ``width`` names, typed (``typed_column``:
    finite numbers, or positions in the sorted categories); None when the file has no row, a
    cell is missing anywhere (a short row shows so), a row is long, or pandas refuses it."""
    import pandas as pd

    try:
        frames = frame_chunks(io.BytesIO(text.encode()), delim, True, len(text), "utf-8",
                              quoted=False)
        frame = next(iter(frames), None)
    except (ValueError, UnicodeError, OverflowError, MemoryError, pd.errors.ParserError,
            pd.errors.EmptyDataError):
        return None
    if (frame is None or not len(frame) or frame.shape[1] != width
            or not isinstance(frame.index, pd.RangeIndex)):
        return None  # no rows, or rows longer than the header (taken as pandas' index)
    columns = [typed_column(frame.iloc[:, j]) for j in range(width)]
    return None if any(c is None for c in columns) else columns  # type: ignore[return-value]


def _first_bad_cells(table: RawTable, col_ids: list[int], coders: list[ColumnCoder]
                     ) -> dict[int, tuple[str, str]]:
    """Row -> (column, reason) of its first cell that cannot be coded, over every row."""
    bad: dict[int, tuple[str, str]] = {}
    all_rows = list(range(table.n_rows))
    for j, coder in zip(col_ids, coders, strict=True):
        tokens = table.column(j, all_rows)
        if coder.code_column(tokens) is not None:
            continue
        for i, tok in enumerate(tokens):
            try:
                coder.code_token(tok)
            except BadValueError as exc:
                bad.setdefault(i, (table.names[j], str(exc)))
    return dict(sorted(bad.items()))


def parse_feature_file_skipping(encoding: dict, content: bytes, filename: str = "",
                                label: str | int | None = None, limits: Limits = NO_LIMITS
                                ) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray | None,
                                           list[int], list[dict]]:
    """``parse_feature_file`` with ``on_error="skip"``: rows with a cell that cannot be coded
    (missing, not a number, an unknown category) are left out. Returns (X, y, the kept rows'
    positions, one error per left-out row: ``row`` (0-based), ``line``, ``column``,
    ``reason``). An svmlight file has no such rows to skip: it is parsed as with "fail"."""
    fmt = file_format(content, filename)
    if fmt in ("parquet", "jsonl"):
        table = _columns_table(encoding, read_columns(encoding, content, fmt, limits), label)
    else:
        if fmt == "svmlight" or not content or content.isspace():
            X, y = parse_feature_file(encoding, content, filename, label, limits)
            return X, y, list(range(X.shape[0])), []
        text = _checked_text(encoding, content, fmt, limits)
        if fmt == "csv" and looks_whitespace_separated(text):
            text = whitespace_to_tabs(text)
        table = _text_table(encoding, text, fmt, limits)
    specs = feature_specs(encoding)
    col_ids, label_idx = _map_columns(encoding, table, label)
    encoder = Encoder.from_dict(encoding)
    bad = _first_bad_cells(table, col_ids, encoder.coders)
    kept = [i for i in range(table.n_rows) if i not in bad]
    check_budget(len(kept), len(col_ids), sum(spec_width(s) for s in specs), False, limits)
    X = encoder.transform_table(table, kept, col_ids)
    y = None
    if label_idx is not None and label_idx not in col_ids:
        tokens = table.column(label_idx, kept)
        if tokens and all(t is not None for t in tokens):
            y = convert_labels(tokens)  # type: ignore[arg-type]
    errors = [{"row": i, "line": table.lines[i], "column": c, "reason": r}
              for i, (c, r) in bad.items()]
    return X, y, kept, errors
