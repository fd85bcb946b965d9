"""Training-time entry point: parse_dataset() and the ParsedDataset it returns."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import scipy.sparse as sp

from . import formats
from .arff import read_arff
from .column_specs import (
    ENCODING_VERSION,
    infer_spec,
    spec_feature_names,
    spec_width,
)
from .columnar import Columns, read_jsonl, read_parquet
from .columns import resolve_drop, resolve_label
from .csv_format import (
    is_whitespace_delimiter,
    looks_whitespace_separated,
    normalize_delimiter,
    read_csv,
    whitespace_to_tabs,
)
from .csv_stream import HEAD_BYTES, Scan, encode_chunks, scan, typed_column
from .encoder import Encoder
from .errors import MAX_ROWS_NAMED, IngestError, missing_error
from .imputation import STRATEGIES, check_missing, impute_spec
from .labels import class_summary, convert_labels
from .limits import (
    NO_LIMITS,
    Limits,
    check_budget,
    check_identifier,
    check_rows,
    choose_sparse,
    max_columns,
)
from .svmlight import check_values, read_svmlight, to_int32_csr
from .table import RawTable
from .text import decode_bytes, is_binary, preview

_FILL_OR_DROP = ("Fill them in, set missing='drop' to drop these rows, or impute them "
                 "(missing='mean', 'median', 'most_frequent' or 'constant').")
_LABEL_MISSING = "A label cannot be imputed: fill it in, or set missing='drop' to drop these rows."


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
                   delimiter: str | None, fill_value: str | None = None) -> None:
    check_missing(missing, fill_value)
    if missing in STRATEGIES and fmt == "svmlight":
        raise IngestError(f"missing={missing!r} (imputation) applies to CSV/TSV and ARFF files; "
                          "this file is read as svmlight: use 'error' or 'drop'.",
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


def table_missing_error(table: RawTable, bad: dict[int, list[int]], remedy: str
                        ) -> IngestError:
    """``missing_error`` for the rows of ``bad`` (``find_missing``) of a parsed file."""
    rows = sorted(bad)
    return missing_error([table.lines[i] for i in rows],
                         [[table.names[j] for j in bad[i]] for i in rows[:MAX_ROWS_NAMED]], remedy,
                         **({"spellings": "null or NaN", "unit": "row"} if table.unit == "row"
                            else {}))


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
            raise IngestError(f"{table.where(i)}, label column {table.names[j]!r}: {tok!r} is not "
                              f"one of the declared classes {preview(decl.categories or [])}.",
                              field="file", row=line, column=table.names[j])


def _label_and_features(names: list[str], label: str | int | None,
                        drop: list[str | int] | None) -> tuple[int, list[int], list[int]]:
    """The indices of the label column, the dropped columns and the feature columns (all the
    others)."""
    label_idx = resolve_label(names, label, default=len(names) - 1)
    dropped = resolve_drop(names, drop, label_idx)
    gone = set(dropped) | {label_idx}
    feat_idx = [j for j in range(len(names)) if j not in gone]
    if not feat_idx:
        raise IngestError(f"No feature columns are left after taking {names[label_idx]!r} as "
                          "the label and removing the dropped columns.", field="drop")
    return label_idx, dropped, feat_idx


def _from_table(table: RawTable, fmt: str, label: str | int | None,
                drop: list[str | int] | None, missing: str,
                limits: Limits = NO_LIMITS, fill_value: str | None = None) -> ParsedDataset:
    names = table.names
    label_idx, dropped, feat_idx = _label_and_features(names, label, drop)
    if table.is_sparse:
        # Omitted entries may each become a stored value (one-hot defaults) or a missing
        # cell: bound rows x columns before looking at them.
        check_rows(table.n_rows, limits)
        check_budget(table.n_rows, len(feat_idx), len(feat_idx), True, limits)
    imputing = missing in STRATEGIES
    bad = find_missing(table, [label_idx] if imputing else [label_idx, *feat_idx])
    if bad and missing != "drop":
        raise table_missing_error(table, bad, _LABEL_MISSING if imputing else _FILL_OR_DROP)
    keep = [i for i in range(table.n_rows) if i not in bad] if bad else list(range(table.n_rows))
    if not keep:
        raise IngestError(f"All {table.n_rows} rows have missing values; nothing is left "
                          "after dropping them.", field="missing")

    check_rows(len(keep), limits)
    specs = []
    for j in feat_idx:
        tokens = [] if table.is_sparse else table.column(j, keep)
        spec = infer_spec(names[j], table.declared[j], tokens, table.is_sparse)
        if spec["kind"] == "categorical" and not table.is_sparse:
            check_identifier(names[j], len(set(tokens) - {None}), len(keep))
        specs.append(impute_spec(spec, missing, fill_value) if imputing else spec)
    sparse = table.is_sparse or _wide_one_hot(len(keep), specs)
    check_budget(len(keep), len(feat_idx), sum(spec_width(s) for s in specs), sparse, limits)
    X = Encoder.from_specs(specs).transform_table(table, keep, feat_idx, sparse=sparse)
    label_tokens = table.column(label_idx, keep)
    _validate_label_tokens(table, label_idx, keep, label_tokens)
    y = convert_labels(label_tokens)  # type: ignore[arg-type]
    return _parsed(X, y, specs, names, label_idx, dropped, fmt, table.n_rows - len(keep),
                   table.delimiter, table.has_header if fmt == "csv" else None)


def _wide_one_hot(n_rows: int, specs: list[dict]) -> bool:
    width = sum(spec_width(s) for s in specs)
    one_hot = any(s["kind"] == "categorical" for s in specs)
    return choose_sparse(n_rows, len(specs), width, one_hot)


def _parsed(X: np.ndarray | sp.csr_matrix | None, y: np.ndarray, specs: list[dict],
            names: list[str], label_idx: int, dropped: list[int], fmt: str, n_rows_dropped: int,
            delimiter: str | None, header: bool | None, sparse: bool | None = None
            ) -> ParsedDataset:
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
        "sparse": bool(sp.issparse(X)) if sparse is None else sparse,
        "delimiter": delimiter,
        "header": header,
        "n_features": None,
        "zero_based": None,
    }
    return ParsedDataset(X=X, y=y, feature_names=feature_names, encoding=encoding,  # type: ignore[arg-type]
                         format=fmt, n_rows_dropped=n_rows_dropped, classes=classes,
                         class_counts=counts)


@dataclass
class StreamedDataset:
    """A training CSV read by ``parse_csv_stream``: everything a ParsedDataset has but ``X``,
    which ``blocks()`` yields a chunk of rows at a time (dense float64, or CSR when ``sparse``),
    reading the file again; ``meta.X`` is None."""

    meta: ParsedDataset
    n_rows: int
    n_features: int
    sparse: bool
    scan: Scan
    feature_columns: list[int]

    def blocks(self) -> Iterator[np.ndarray | sp.csr_matrix]:
        specs = self.meta.encoding["columns"]
        encoder = Encoder.from_specs(specs)
        categories = [s.get("categories") if s["kind"] == "categorical" else None
                      for s in specs]

        def encode(n: int, parts: list[tuple[np.ndarray, bool]]) -> np.ndarray | sp.csr_matrix:
            return encoder.transform_columns(n, [v for v, _ in parts], self.sparse)

        yield from encode_chunks(self.scan, self.feature_columns, categories, encode)

    @property
    def dtype(self) -> np.dtype:
        """The narrowest dtype that holds every value of the dense matrix exactly: int8 when
        every numeric feature holds small integers in every chunk (0/1 data; one-hot is 0/1),
        else float64. Storing it so takes an eighth of the bytes."""
        numeric = [j for j in self.feature_columns if self.scan.kinds[j].numeric]
        small = all(chunk[j].dtype == np.int8 for chunk in self.scan.chunks for j in numeric)
        return np.dtype(np.int8 if small else np.float64)

    def matrix(self) -> np.ndarray | sp.csr_matrix:
        """The whole feature matrix (for callers that want it in memory)."""
        blocks = list(self.blocks())
        self.scan.close()
        if self.sparse:
            X = sp.vstack(blocks, format="csr")
            return to_int32_csr(X)
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def parse_csv_stream(source: IO[Any], *, label: str | int | None = None,
                     drop: list[str | int] | None = None, header: bool | None = None,
                     delimiter: str | None = None, encoding: str | None = "utf-8-sig",
                     limits: Limits = NO_LIMITS) -> StreamedDataset | None:
    """A training CSV from a file object (binary in ``encoding``, or text with None), read in
    chunks (``csv_stream``); None when the careful reader must read it (``parse_dataset``)."""
    delim = normalize_delimiter(delimiter) if delimiter is not None else None
    result = scan(source, header=header, delimiter=delim, encoding=encoding,
                  label_columns=lambda names: [_label_and_features(names, label, drop)[0]])
    if result is None:
        return None
    names = result.names
    label_idx, dropped, feat_idx = _label_and_features(names, label, drop)
    n = result.n_rows
    check_rows(n, limits)
    specs: list[dict] = []
    for j in feat_idx:
        kind = result.kinds[j]
        if kind.numeric:
            specs.append({"name": kind.name, "kind": "numeric"})
        else:
            check_identifier(kind.name, len(kind.categories), n)  # type: ignore[arg-type]
            specs.append({"name": kind.name, "kind": "categorical",
                          "categories": sorted(kind.categories)})  # type: ignore[arg-type]
    sparse = _wide_one_hot(n, specs)
    width = sum(spec_width(s) for s in specs)
    check_budget(n, len(feat_idx), width, sparse, limits)
    values = result.label_values(label_idx)
    y = convert_labels(values) if result.kinds[label_idx].numeric else values.astype(str)
    meta = _parsed(None, y, specs, names, label_idx, dropped, "csv", 0, result.delimiter,
                   result.has_header, sparse=sparse)
    return StreamedDataset(meta=meta, n_rows=n, n_features=width, sparse=sparse, scan=result,
                           feature_columns=feat_idx)


def parse_upload_stream(source: IO[bytes], filename: str = "", *, format: str | None = None,
                        label: str | int | None = None, drop: list[str | int] | None = None,
                        missing: str = "error", n_features: int | None = None,
                        header: bool | None = None, delimiter: str | None = None,
                        limits: Limits = NO_LIMITS, fill_value: str | None = None
                        ) -> StreamedDataset | None:
    """An upload held in a binary file, read in chunks when it is a CSV the fast path reads
    (UTF-8, not JSON, no missing value...; the caller has refused NUL bytes); None for
    anything else: the caller then reads the whole file with ``parse_dataset``, which gives the
    same dataset or the precise error. The file is read from its current position."""
    if missing in STRATEGIES:
        return None  # imputation: parse_dataset reads the whole file
    start = source.tell()
    head = source.read(HEAD_BYTES)
    source.seek(start)
    if not head.strip() or is_binary(head) or head.lstrip()[:1] in (b"{", b"["):
        return None
    cut = head.rfind(b"\n")
    if cut < 0 and len(head) == HEAD_BYTES:
        return None  # a first line beyond the head: the whole file decides
    try:
        text = head[: cut + 1 if len(head) == HEAD_BYTES else len(head)].decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    fmt = formats.detect(text, filename, format).reader
    if fmt != "csv" or is_whitespace_delimiter(delimiter) or (
            delimiter is None and looks_whitespace_separated(text)):
        return None  # (whitespace-separated text: parse_dataset reads it)
    _check_options(fmt, missing, n_features, header, delimiter)
    return parse_csv_stream(source, label=label, drop=drop, header=header, delimiter=delimiter,
                            limits=limits)


def _from_svmlight(text: str, label: str | int | None, drop: list[str | int] | None,
                   missing: str, n_features: int | None, limits: Limits) -> ParsedDataset:
    if label not in (None, 0, "0"):
        raise IngestError("svmlight files always carry the label as the first field of each "
                          "line; leave label unset.", field="label")
    X, y_raw, zero_based = read_svmlight(text, n_features=n_features,
                                         max_features=limits.max_features)
    check_rows(X.shape[0], limits)
    d = X.shape[1]
    if d == 0:
        raise IngestError("No row has any 'index:value' feature entry; pass n_features if "
                          "all-zero rows are intended.", field="file")
    names = [f"f{k}" for k in range(1, d + 1)]
    dropped = resolve_drop(names, drop, label_idx=-1)
    if len(dropped) == d:
        raise IngestError("No feature columns are left after removing the dropped columns.",
                          field="drop")
    n_rows = X.shape[0]
    keep = check_values(text, X, missing, _FILL_OR_DROP)
    if keep is not None:
        if not len(keep):
            raise IngestError("All rows have missing values.", field="missing")
        X, y_raw = X[keep], y_raw[keep]
    y = convert_labels(y_raw)
    gone = set(dropped)
    specs = [{"name": n, "kind": "numeric"} for j, n in enumerate(names) if j not in gone]
    encoding = {
        "version": ENCODING_VERSION,
        "format": "svmlight",
        "input_columns": names,
        "label": None,  # svmlight: always the first field of a line
        "label_index": None,
        "dropped": [names[j] for j in dropped],
        "columns": specs,
        "n_output_features": len(specs),
        "sparse": True,
        "delimiter": None,
        "header": None,
        "n_features": d,
        "zero_based": zero_based,
    }
    X = Encoder.from_dict(encoding).transform_sparse(X)
    classes, counts = class_summary(y)
    return ParsedDataset(X=X, y=y, feature_names=[s["name"] for s in specs], encoding=encoding,
                         format="svmlight", n_rows_dropped=n_rows - X.shape[0],
                         classes=classes, class_counts=counts)


def parse_dataset(content: bytes, filename: str = "", *, format: str | None = None,
                  label: str | int | None = None, drop: list[str | int] | None = None,
                  missing: str = "error", n_features: int | None = None,
                  header: bool | None = None, delimiter: str | None = None,
                  limits: Limits = NO_LIMITS, fill_value: str | None = None) -> ParsedDataset:
    """Parse an uploaded training file; see the package docstring for the rules.

    ``limits`` bounds rows, features and the encoded matrix's bytes; they are checked before
    anything proportional to them is allocated (IngestLimitError)."""
    early = formats.lookup(format) if format is not None else formats.by_extension(filename)
    if (early.reader == "parquet") if early else content[:4] == formats.PARQUET_MAGIC:
        _check_options("parquet", missing, n_features, header, delimiter, fill_value)
        columns = read_parquet(content, max_rows=limits.max_rows,
                               max_columns=max_columns(limits),
                               max_bytes=limits.max_encoded_bytes)
        return parse_columns(columns, "parquet", label, drop, missing, limits, fill_value)
    text = decode_bytes(content)
    if not text.strip():
        raise IngestError("The file is empty.", field="file")
    _refuse_json(text)
    fmt = (early or formats.by_content(text)).reader
    _check_options(fmt, missing, n_features, header, delimiter, fill_value)
    if fmt == "jsonl":
        raw = content if not content.startswith((b"\xff\xfe", b"\xfe\xff")) else text.encode()
        columns = read_jsonl(raw, max_rows=limits.max_rows, max_columns=max_columns(limits))
        return parse_columns(columns, "jsonl", label, drop, missing, limits, fill_value)
    if fmt == "csv" and (is_whitespace_delimiter(delimiter) or (
            delimiter is None and looks_whitespace_separated(text))):
        text, delimiter = whitespace_to_tabs(text), "\t"
    if fmt == "svmlight":
        return _from_svmlight(text, label, drop, missing, n_features, limits)
    if fmt == "csv":
        streamed = parse_csv_stream(io.StringIO(text), label=label, drop=drop, header=header,
                                    delimiter=delimiter, encoding=None, limits=limits)
        if streamed is not None:  # (no missing value)
            streamed.meta.X = streamed.matrix()
            if missing in STRATEGIES:
                enc = streamed.meta.encoding
                enc["columns"] = [impute_spec(c, missing, fill_value) for c in enc["columns"]]
            return streamed.meta
        delim = normalize_delimiter(delimiter) if delimiter is not None else None
        table = read_csv(text, header=header, delimiter=delim)
    else:
        table = read_arff(text, max_attributes=max_columns(limits))
    return _from_table(table, fmt, label, drop, missing, limits, fill_value)


def parse_columns(columns: Columns, fmt: str, label: str | int | None,
                  drop: list[str | int] | None, missing: str, limits: Limits = NO_LIMITS,
                  fill_value: str | None = None) -> ParsedDataset:
    """A Parquet or JSON Lines file (``columnar``): the dataset the CSV of the same rows gives.
    Only the label and feature columns are read, after the rows and a lower bound of the
    encoded size are checked. Columns the pandas CSV reader would type (no missing value) are
    encoded as training's chunked CSV path encodes them; anything else goes through the
    careful path (``_from_table``) with the same missing-value rules and errors."""
    names = columns.names
    label_idx, dropped, feat_idx = _label_and_features(names, label, drop)
    check_rows(columns.n_rows, limits)
    check_budget(columns.n_rows, len(feat_idx), len(feat_idx), False, limits)  # a lower bound
    used = sorted([label_idx, *feat_idx])
    series = columns.read(used)
    parsed = None
    if missing not in STRATEGIES:
        typed = dict(zip(used, (typed_column(s) for s in series), strict=True))
        parsed = _from_typed(typed, columns.n_rows, names, label_idx, dropped, feat_idx, fmt,
                             limits)
    if parsed is None:
        sub = columns.table(used, series)
        parsed = _from_table(sub, fmt, used.index(label_idx), None, missing, limits, fill_value)
        parsed.encoding.update(input_columns=list(names), label_index=label_idx,
                               dropped=[names[j] for j in dropped])
    parsed.encoding.update(delimiter=None, header=None)
    return parsed


def _from_typed(typed: dict[int, Any], n: int, names: list[str], label_idx: int,
                dropped: list[int], feat_idx: list[int], fmt: str, limits: Limits
                ) -> ParsedDataset | None:
    """``parse_columns``' dataset from columns ``typed_column`` typed; None if one is not."""
    if any(t is None for t in typed.values()):
        return None
    specs: list[dict] = []
    for j in feat_idx:
        _, categories = typed[j]
        if categories is None:
            specs.append({"name": names[j], "kind": "numeric"})
        else:
            check_identifier(names[j], len(categories), n)
            specs.append({"name": names[j], "kind": "categorical", "categories": categories})
    sparse = _wide_one_hot(n, specs)
    check_budget(n, len(feat_idx), sum(spec_width(s) for s in specs), sparse, limits)
    X = Encoder.from_specs(specs).transform_columns(n, [typed[j][0] for j in feat_idx], sparse)
    if sparse:
        X = to_int32_csr(X)
    values, categories = typed[label_idx]
    y = (convert_labels(values) if categories is None
         else np.asarray(categories, dtype=object)[values].astype(str))
    return _parsed(X, y, specs, names, label_idx, dropped, fmt, 0, None, None)


def _refuse_json(text: str) -> None:
    """A JSON document is not a data file (read as CSV it would be a 1-row table)."""
    lead = text.lstrip()
    head = lead[:1]
    if head not in ("{", "["):
        return
    if head == "{":
        end = lead.find("\n")
        if end < 0 or not lead[end + 1:].strip():
            return  # one object on one line: a JSON Lines file of one row
    try:
        json.loads(text)
    except ValueError:
        return
    raise IngestError("The file is a JSON document, not a data file; upload CSV/TSV, ARFF, "
                      "svmlight, Parquet, or JSON Lines (one object per line; to predict from "
                      "JSON rows, use POST /predict).",
                      field="file")
