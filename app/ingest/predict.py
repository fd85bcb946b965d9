"""Prediction-time files: parse_feature_file() encodes a new file like the training data (with
the model's ``Encoder``)."""

from __future__ import annotations

import csv
import io
from operator import methodcaller

import numpy as np
import scipy.sparse as sp

from .arff import read_arff
from .columns import resolve_label
from .csv_format import read_csv, sniff_delimiter
from .dataset import _MAX_ROWS_NAMED, find_missing, rows_phrase
from .encoder import Encoder, number_table  # noqa: F401  (number_table: app.predict reads it here)
from .encoding import feature_specs, spec_width
from .errors import IngestError
from .labels import convert_labels
from .limits import NO_LIMITS, Limits, check_budget
from .sniff import detect_format
from .svmlight import data_lines, read_svmlight, rows_with, to_int32_csr
from .table import RawTable
from .text import clean_token, decode_bytes, is_number, preview


def _svmlight_features(encoding: dict, text: str) -> tuple[sp.csr_matrix, np.ndarray]:
    if encoding.get("format") != "svmlight":
        raise IngestError(f"This model was trained on a {encoding.get('format')} file; upload "
                          "CSV or ARFF with the training columns, not svmlight.",
                          field="format")
    X, y, _ = read_svmlight(text, n_features=encoding["n_features"],
                            zero_based=encoding["zero_based"])
    bad = rows_with(X, ~np.isfinite(X.data))
    if len(bad):
        line = data_lines(text)[int(bad[0])]
        raise IngestError(f"Line {line}: missing or infinite feature value.", field="file",
                          row=line)
    names = encoding["input_columns"]
    dropped = set(encoding.get("dropped") or [])
    if dropped:
        X = X[:, [j for j, n in enumerate(names) if n not in dropped]]
    return to_int32_csr(X), convert_labels(y)


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
    needs a prediction), so missing feature values are an error. A table whose encoded matrix
    would exceed ``limits.max_encoded_bytes`` (wide one-hot columns) raises IngestLimitError
    before it is built; svmlight and plain numeric CSV give matrices in proportion to the file.
    """
    specs = feature_specs(encoding)
    text = decode_bytes(content)
    if not text or text.isspace():  # (not text.strip(): no copy of a large upload)
        raise IngestError("The file is empty.", field="file")
    fmt = detect_format(text, filename)
    if fmt == "svmlight":
        return _svmlight_features(encoding, text)
    if fmt == "csv" and (fast := _plain_csv_features(encoding, text, label)) is not None:
        return fast
    if fmt == "csv":
        table = read_csv(text, preferred_delimiter=encoding.get("delimiter"),
                         known_names={s["name"] for s in specs})
    else:
        table = read_arff(text)
    col_ids, label_idx = _map_columns(encoding, table, label)
    if label_idx is not None and label_idx in col_ids:
        raise IngestError(f"Column {table.names[label_idx]!r} is a feature of this model and "
                          "cannot be the label.", field="label")
    bad = find_missing(table, col_ids)
    if bad:
        rows = sorted(bad)
        shown = ", ".join(f"line {table.lines[i]} ({table.names[bad[i][0]]!r})"
                          for i in rows[:_MAX_ROWS_NAMED])
        raise IngestError(f"{rows_phrase(len(rows))} missing feature values: {shown}. Every "
                          "row needs all features to be predicted.", field="missing",
                          row=table.lines[rows[0]], column=table.names[bad[rows[0]][0]])
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
                shown = ", ".join(str(table.lines[i]) for i in absent[:_MAX_ROWS_NAMED])
                raise IngestError(f"The label column {table.names[label_idx]!r} is empty in "
                                  f"{len(absent)} rows (lines {shown}); fill every label or "
                                  "none.", field="label", row=table.lines[absent[0]],
                                  column=table.names[label_idx])
            y = convert_labels(tokens)  # type: ignore[arg-type]
    return X, y


def _plain_csv_features(encoding: dict, text: str, label: str | int | None
                        ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """parse_feature_file's answer for the plainest CSV, read by pandas' C parser: a header
    naming every (numeric) training feature, every line with the same number of delimiters,
    no quotes, every feature value a finite number and every label present. None for
    anything else, which the careful parser then reads (and explains when it fails): this
    path never produces an error of its own and, where it answers, answers the same.
    """
    specs = feature_specs(encoding)
    if not specs or any(s["kind"] != "numeric" or s.get("values") is not None for s in specs):
        return None
    if '"' in text:
        return None
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    if len(lines) < 2 or not lines[0].strip():
        return None
    # The delimiter the careful parser picks (sniff_delimiter reads only the first lines).
    delim = sniff_delimiter(text, encoding.get("delimiter"))
    width = lines[0].count(delim)
    if width < 1 or set(map(methodcaller("count", delim), lines)) != {width}:
        return None  # blank, ragged or single-column lines: the careful parser decides
    names = [h.strip() for h in lines[0].split(delim)]
    if len(set(names)) != len(names) or any(not n or is_number(n) for n in names):
        return None
    index = {n: j for j, n in enumerate(names)}
    wanted = [s["name"] for s in specs]
    if any(n not in index for n in wanted):
        return None
    try:
        label_idx = (resolve_label(names, label, default=-1) if label is not None
                     else index.get(encoding.get("label")))  # type: ignore[arg-type]
    except IngestError:
        return None
    col_ids = [index[n] for n in wanted]
    if label_idx is not None and label_idx in col_ids:
        return None
    X = _read_numbers(text, delim, col_ids, len(lines) - 1)
    if X is None:
        return None
    y = None
    if label_idx is not None:
        tokens = [clean_token(line.split(delim)[label_idx]) for line in lines[1:]]
        if any(t is None for t in tokens):
            return None
        y = convert_labels(tokens)  # type: ignore[arg-type]
    return np.ascontiguousarray(X), y


def _read_numbers(text: str, delim: str, col_ids: list[int], n_rows: int) -> np.ndarray | None:
    """The columns ``col_ids`` of a plain CSV as finite float64 (n_rows, k), or None."""
    import pandas as pd

    try:  # pandas' C reader: 5x numpy's loadtxt here, and as exact (correctly rounded)
        # (typed by the reader: asking for float64 costs it 70 % more)
        frame = pd.read_csv(io.BytesIO(text.encode()), sep=delim, header=0, usecols=col_ids,
                            na_filter=False, engine="c", comment=None,
                            quoting=csv.QUOTE_NONE, skip_blank_lines=False)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, OverflowError):
        return None
    if not all(t.kind in "if" and t.itemsize == 8 for t in frame.dtypes):
        return None  # text, "True"/"False", integers beyond 64 bits: the careful parser
    X = frame.to_numpy(dtype=np.float64)
    if col_ids != sorted(col_ids):  # usecols keeps the file's column order
        X = X[:, np.argsort(np.argsort(col_ids))]
    if X.shape != (n_rows, len(col_ids)) or not np.isfinite(X).all():
        return None
    return X
