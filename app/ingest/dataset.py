"""Training-time entry point: parse_dataset() and the ParsedDataset it returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .arff import read_arff
from .columns import resolve_drop, resolve_label
from .csv_format import normalize_delimiter, read_csv
from .encoding import ENCODING_VERSION, encode_table, infer_spec, spec_feature_names
from .errors import IngestError
from .labels import class_summary, convert_labels
from .sniff import detect_format, normalize_format
from .svmlight import data_lines, read_svmlight, rows_with, to_int32_csr
from .table import RawTable
from .text import decode_bytes, preview

_MAX_ROWS_NAMED = 10


def rows_phrase(n: int) -> str:
    return "1 row has" if n == 1 else f"{n} rows have"


@dataclass
class ParsedDataset:
    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    feature_names: list[str]
    encoding: dict
    format: str
    n_rows_dropped: int
    classes: list
    class_counts: list[int]


def _check_options(fmt: str, missing: str, n_features: int | None, header: bool | None,
                   delimiter: str | None) -> None:
    if missing not in ("error", "drop"):
        raise IngestError(f"missing must be 'error' or 'drop', not {missing!r}.",
                          field="missing")
    if n_features is not None:
        if fmt != "svmlight":
            raise IngestError(f"n_features applies only to svmlight files; this file is read "
                              f"as {fmt}.", field="n_features")
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
            raise IngestError("n_features must be a positive integer.", field="n_features")
    for opt, value in (("header", header), ("delimiter", delimiter)):
        if value is not None and fmt != "csv":
            raise IngestError(f"{opt} applies only to CSV/TSV files; this file is read as "
                              f"{fmt}.", field=opt)


def _missing_problem(table: RawTable, row_ids: list[int], bad: dict[int, list[int]]) -> str:
    parts = []
    for i in row_ids[:_MAX_ROWS_NAMED]:
        cols = ", ".join(repr(table.names[j]) for j in bad[i][:3])
        parts.append(f"line {table.lines[i]} ({cols})")
    more = f" and {len(row_ids) - _MAX_ROWS_NAMED} more" if len(row_ids) > _MAX_ROWS_NAMED else ""
    return (f"{rows_phrase(len(row_ids))} missing values (empty, '?', 'NA' or 'NaN'): "
            f"{'; '.join(parts)}{more}. Fill them in, or set missing='drop' to drop these rows.")


def find_missing(table: RawTable, used: list[int]) -> dict[int, list[int]]:
    """Row position -> used columns that are missing in it."""
    bad: dict[int, list[int]] = {}
    if table.is_sparse:
        used_set = set(used)
        omitted_missing = [j for j in used if table.sparse_default(j) is None]
        for i, row in enumerate(table.sparse_rows):  # type: ignore[arg-type]
            cols = [j for j, v in row.items() if v is None and j in used_set]
            cols += [j for j in omitted_missing if j not in row]
            if cols:
                bad[i] = sorted(cols)
    else:
        for i, row in enumerate(table.rows):  # type: ignore[arg-type]
            cols = [j for j in used if row[j] is None]
            if cols:
                bad[i] = cols
    return bad


def _validate_label_tokens(table: RawTable, j: int, row_ids: list[int],
                           tokens: list[str | None]) -> None:
    decl = table.declared[j]
    if decl is None or decl.kind != "nominal":
        return
    allowed = set(decl.categories or [])
    for i, tok in zip(row_ids, tokens, strict=True):
        if tok not in allowed:
            line = table.lines[i]
            raise IngestError(f"Line {line}, label column {table.names[j]!r}: {tok!r} is not "
                              f"one of the declared classes {preview(decl.categories or [])}.",
                              field="file", row=line, column=table.names[j])


def _from_table(table: RawTable, fmt: str, label: str | int | None,
                drop: list[str | int] | None, missing: str) -> ParsedDataset:
    names = table.names
    label_idx = resolve_label(names, label, default=len(names) - 1)
    dropped = resolve_drop(names, drop, label_idx)
    gone = set(dropped) | {label_idx}
    feat_idx = [j for j in range(len(names)) if j not in gone]
    if not feat_idx:
        raise IngestError(f"No feature columns are left after taking {names[label_idx]!r} as "
                          "the label and removing the dropped columns.", field="drop")
    bad = find_missing(table, [label_idx, *feat_idx])
    bad_rows = sorted(bad)
    if bad_rows and missing == "error":
        first = bad_rows[0]
        raise IngestError(_missing_problem(table, bad_rows, bad), field="missing",
                          row=table.lines[first], column=names[bad[first][0]])
    keep = [i for i in range(table.n_rows) if i not in bad] if bad else list(range(table.n_rows))
    if not keep:
        raise IngestError(f"All {table.n_rows} rows have missing values; nothing is left "
                          "after dropping them.", field="missing")

    specs = [infer_spec(names[j], table.declared[j],
                        [] if table.is_sparse else table.column(j, keep), table.is_sparse)
             for j in feat_idx]
    X = encode_table(table, keep, feat_idx, specs)
    label_tokens = table.column(label_idx, keep)
    _validate_label_tokens(table, label_idx, keep, label_tokens)
    y = convert_labels(label_tokens)  # type: ignore[arg-type]
    feature_names = [n for s in specs for n in spec_feature_names(s)]
    classes, counts = class_summary(y)
    encoding = {
        "version": ENCODING_VERSION,
        "format": fmt,
        "input_columns": list(names),
        "label": names[label_idx],
        "label_index": label_idx,
        "dropped": [names[j] for j in dropped],
        "columns": specs,
        "n_output_features": len(feature_names),
        "sparse": table.is_sparse,
        "delimiter": table.delimiter,
        "header": table.has_header if fmt == "csv" else None,
        "n_features": None,
        "zero_based": None,
    }
    return ParsedDataset(X=X, y=y, feature_names=feature_names, encoding=encoding, format=fmt,
                         n_rows_dropped=table.n_rows - len(keep), classes=classes,
                         class_counts=counts)


def _from_svmlight(text: str, label: str | int | None, drop: list[str | int] | None,
                   missing: str, n_features: int | None) -> ParsedDataset:
    if label not in (None, 0, "0"):
        raise IngestError("svmlight files always carry the label as the first field of each "
                          "line; leave label unset.", field="label")
    X, y_raw, zero_based = read_svmlight(text, n_features=n_features)
    d = X.shape[1]
    if d == 0:
        raise IngestError("No row has any 'index:value' feature entry; pass n_features if "
                          "all-zero rows are intended.", field="file")
    names = [f"f{k}" for k in range(1, d + 1)]
    dropped = resolve_drop(names, drop, label_idx=-1)
    keep_cols = [j for j in range(d) if j not in set(dropped)]
    if not keep_cols:
        raise IngestError("No feature columns are left after removing the dropped columns.",
                          field="drop")
    n_rows = X.shape[0]
    bad_rows = rows_with(X, np.isnan(X.data))
    infinite = rows_with(X, np.isinf(X.data))
    if len(infinite):
        line = data_lines(text)[int(infinite[0])]
        raise IngestError(f"Line {line}: infinite feature value; replace it with a finite "
                          "number.", field="file", row=line)
    if len(bad_rows):
        if missing == "error":
            lines = data_lines(text)
            shown = ", ".join(str(lines[int(i)]) for i in bad_rows[:_MAX_ROWS_NAMED])
            raise IngestError(f"{rows_phrase(len(bad_rows))} missing (NaN) values, on lines "
                              f"{shown}. Fix them or set missing='drop'.", field="missing",
                              row=lines[int(bad_rows[0])])
        keep = np.setdiff1d(np.arange(n_rows), bad_rows)
        if not len(keep):
            raise IngestError("All rows have missing values.", field="missing")
        X, y_raw = X[keep], y_raw[keep]
    if dropped:
        X = X[:, keep_cols]
    X = to_int32_csr(X)
    y = convert_labels(y_raw)
    feature_names = [names[j] for j in keep_cols]
    classes, counts = class_summary(y)
    encoding = {
        "version": ENCODING_VERSION,
        "format": "svmlight",
        "input_columns": names,
        "label": None,  # svmlight: always the first field of a line
        "label_index": None,
        "dropped": [names[j] for j in dropped],
        "columns": [{"name": n, "kind": "numeric"} for n in feature_names],
        "n_output_features": len(feature_names),
        "sparse": True,
        "delimiter": None,
        "header": None,
        "n_features": d,
        "zero_based": zero_based,
    }
    return ParsedDataset(X=X, y=y, feature_names=feature_names, encoding=encoding,
                         format="svmlight", n_rows_dropped=n_rows - X.shape[0],
                         classes=classes, class_counts=counts)


def parse_dataset(content: bytes, filename: str = "", *, format: str | None = None,
                  label: str | int | None = None, drop: list[str | int] | None = None,
                  missing: str = "error", n_features: int | None = None,
                  header: bool | None = None, delimiter: str | None = None) -> ParsedDataset:
    """Parse an uploaded training file; see the package docstring for the rules."""
    text = decode_bytes(content)
    if not text.strip():
        raise IngestError("The file is empty.", field="file")
    fmt = normalize_format(format) if format is not None else detect_format(text, filename)
    _check_options(fmt, missing, n_features, header, delimiter)
    if fmt == "svmlight":
        return _from_svmlight(text, label, drop, missing, n_features)
    if fmt == "csv":
        delim = normalize_delimiter(delimiter) if delimiter is not None else None
        table = read_csv(text, header=header, delimiter=delim)
    else:
        table = read_arff(text)
    return _from_table(table, fmt, label, drop, missing)
