"""Prediction-time uploads: parse_feature_file() encodes a new file like the training data."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .arff import read_arff
from .columns import resolve_label
from .csv_format import read_csv
from .dataset import _MAX_ROWS_NAMED, find_missing, rows_phrase
from .encoding import encode_table, feature_specs
from .errors import IngestError
from .labels import convert_labels
from .sniff import detect_format
from .svmlight import data_lines, read_svmlight, rows_with, to_int32_csr
from .table import RawTable
from .text import decode_bytes, preview


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
                       label: str | int | None = None
                       ) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray | None]:
    """Encode a prediction-time upload like the training data.

    Returns (X, y) where y is the label column when the file has one (the training label's
    name, or ``label``) with a value in every row, else None. Rows are never dropped (each
    needs a prediction), so missing feature values are an error.
    """
    specs = feature_specs(encoding)
    text = decode_bytes(content)
    if not text.strip():
        raise IngestError("The file is empty.", field="file")
    fmt = detect_format(text, filename)
    if fmt == "svmlight":
        return _svmlight_features(encoding, text)
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
    all_rows = list(range(table.n_rows))
    X = encode_table(table, all_rows, col_ids, specs)
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
