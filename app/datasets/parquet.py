"""Parquet files of a dataset by reference, read by the one Parquet reader
(``app.ingest.readers.parquet``): the first pass over each file (schema, rows, label
classes, categories, numeric ranges; streamed a chunk at a time), the encoding those passes
make together (the format ``app.ingest`` documents, so the one ``Encoder`` encodes it), and one
file read back as its encoded feature matrix and labels.

Every function here runs where it is called: in the service's process, or as a task on a Dask
worker (``app.datasets.reference`` maps ``file_pass`` and ``read_partition`` over the files).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from app.ingest import Encoder, encoding_feature_names, formats
from app.ingest.columnar import arrow_numpy
from app.ingest.errors import IngestError
from app.ingest.readers import parquet

#: distinct values a categorical (string) column may hold (more: an identifier, to drop)
MAX_CATEGORIES = 10_000


def open_checked(path: str) -> Any:
    """The file's footer (``readers.parquet.open_file``: a local path or fsspec URL), a file
    that is not Parquet (or cannot be read) being a 422 naming it."""
    try:
        return parquet.open_file(path)
    except (OSError, parquet.ParquetReadError) as exc:
        reason = exc.reason if isinstance(exc, parquet.ParquetReadError) else str(exc)
        other = _other_format(path)
        raise IngestError(f"{path} is not a readable Parquet file ({type(exc).__name__}: "
                          f"{reason[:200]}){other}", field="uri") from None


def _other_format(path: str) -> str:
    """What the format registry reads the file as, when that is not Parquet: a sentence saying
    so and where such a file goes (empty when the file cannot be read at all)."""
    import fsspec

    try:
        with fsspec.open(path, "rb") as source:
            head = source.read(formats.SNIFF_BYTES)
    except (OSError, ValueError):
        return ""
    found = formats.detect(head, path)
    if found.name == "parquet":
        return ""
    return (f"; it reads as {found.name}: a dataset by reference is Parquet files (upload a "
            f"{found.name} file with POST /datasets, or write it as Parquet)")


def _kind(field: Any) -> str:
    import pyarrow as pa

    t = field.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return "numeric"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "categorical"
    return str(t)


def file_pass(path: str, label: str) -> dict[str, Any]:
    """One file's first pass: its columns and their kinds, rows, nulls per column, each numeric
    column's min and max, each string column's distinct values and the label's counts."""
    pf = open_checked(path)
    schema = pf.schema_arrow
    kinds = {f.name: _kind(f) for f in schema}
    if label not in kinds:
        raise IngestError(f"{path}: no label column {label!r} (columns: "
                          f"{', '.join(kinds)})", field="label", column=label)
    out: dict[str, Any] = {"path": path, "columns": list(kinds), "kinds": kinds, "n_rows": 0,
                           "nulls": Counter(), "ranges": {}, "categories": {},
                           "labels": Counter()}
    for chunk in parquet.chunks(pf):
        _add_group(out, chunk, label)
    out["nulls"] = dict(out["nulls"])
    out["categories"] = {k: sorted(v) for k, v in out["categories"].items()}
    out["labels"] = [[k, v] for k, v in out["labels"].items()]
    return out


def _add_group(out: dict[str, Any], table: Any, label: str) -> None:
    import pyarrow.compute as pc

    out["n_rows"] += table.num_rows
    for name in out["columns"]:
        column = table.column(name)
        out["nulls"][name] += column.null_count
        if name == label:
            typed = labels_of(arrow_numpy(column))
            for value, count in zip(*np.unique(typed, return_counts=True), strict=True):
                out["labels"][value.item() if hasattr(value, "item") else value] += int(count)
        elif out["kinds"][name] == "numeric" and table.num_rows:
            lo_hi = pc.min_max(column)
            lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
            if lo is not None:
                old = out["ranges"].get(name, [lo, hi])
                out["ranges"][name] = [min(old[0], float(lo)), max(old[1], float(hi))]
        elif out["kinds"][name] == "categorical":
            seen = out["categories"].setdefault(name, set())
            seen.update(v for v in pc.unique(column).to_pylist() if v is not None)
            if len(seen) > MAX_CATEGORIES:
                raise IngestError(f"column {name!r} holds more than {MAX_CATEGORIES} distinct "
                                  "values (an identifier?): add it to drop", field="drop",
                                  column=name)


def combine(passes: list[dict[str, Any]], label: str, drop: list[str]) -> dict[str, Any]:
    """The dataset's metadata from its files' passes: ``encoding`` (app.ingest's format,
    ``format`` "parquet"), ``classes``, ``class_counts``, ``n_rows``, ``feature_names`` and the
    encoded features' ``data_min``/``data_max`` (min-max scaling without a second pass)."""
    first = passes[0]
    for p in passes[1:]:
        if p["columns"] != first["columns"] or p["kinds"] != first["kinds"]:
            raise IngestError(f"{p['path']} has other columns (or types) than {first['path']}: "
                              "every file of a dataset has the same schema", field="uri")
    unknown = [d for d in drop if d not in first["columns"] or d == label]
    if unknown:
        raise IngestError(f"drop names {unknown[0]!r}, which is not a feature column",
                          field="drop", column=unknown[0])
    for p in passes:
        if p["nulls"].get(label):
            raise IngestError(f"{p['path']}: the label column {label!r} holds "
                              f"{p['nulls'][label]} missing values", field="label", column=label)
    specs = []
    for name in first["columns"]:
        if name == label or name in drop:
            continue
        _check_column(passes, name, first["kinds"][name])
        specs.append(_spec(passes, name, first["kinds"][name]))
    if not specs:
        raise IngestError("no feature column is left", field="drop")
    encoding = {
        "version": 1, "format": "parquet", "input_columns": first["columns"], "label": label,
        "label_index": first["columns"].index(label), "dropped": list(drop), "columns": specs,
        "n_output_features": sum(len(s.get("categories") or [0]) for s in specs),
        "sparse": False, "delimiter": None, "header": None, "n_features": None,
        "zero_based": None,
    }
    counts: Counter = Counter()
    for p in passes:
        counts.update({k: v for k, v in p["labels"]})
    classes = sorted(counts)
    lo, hi = _feature_ranges(passes, specs)
    return {"encoding": encoding, "classes": classes,
            "class_counts": [counts[c] for c in classes],
            "n_rows": sum(p["n_rows"] for p in passes),
            "feature_names": encoding_feature_names(encoding), "data_min": lo, "data_max": hi}


def _check_column(passes: list[dict[str, Any]], name: str, kind: str) -> None:
    if kind not in ("numeric", "categorical"):
        raise IngestError(f"column {name!r} has type {kind}, which is not a feature: add it "
                          "to drop", field="drop", column=name)
    for p in passes:
        if p["nulls"].get(name):
            raise IngestError(f"{p['path']}: column {name!r} holds {p['nulls'][name]} missing "
                              "values; a dataset by reference holds none (drop the column, "
                              "or fill them)", field="uri", column=name)


def _spec(passes: list[dict[str, Any]], name: str, kind: str) -> dict[str, Any]:
    if kind == "numeric":
        return {"name": name, "kind": "numeric"}
    cats = sorted({c for p in passes for c in p["categories"].get(name, ())})
    if len(cats) > MAX_CATEGORIES:
        raise IngestError(f"column {name!r} holds more than {MAX_CATEGORIES} distinct values "
                          "(an identifier?): add it to drop", field="drop", column=name)
    return {"name": name, "kind": "categorical", "categories": cats}


def _feature_ranges(passes: list[dict[str, Any]], specs: list[dict[str, Any]]
                    ) -> tuple[list[float], list[float]]:
    """Each encoded feature's min and max over every row: a numeric column's range; a one-hot
    column is 0..1 (1..1 when its column has one category)."""
    lo: list[float] = []
    hi: list[float] = []
    for spec in specs:
        name = spec["name"]
        if spec["kind"] == "categorical":
            single = len(spec["categories"]) == 1
            lo += [1.0 if single else 0.0] * len(spec["categories"])
            hi += [1.0] * len(spec["categories"])
            continue
        ranges = [p["ranges"][name] for p in passes if name in p["ranges"]]
        lo.append(min(r[0] for r in ranges) if ranges else 0.0)
        hi.append(max(r[1] for r in ranges) if ranges else 0.0)
    if not all(math.isfinite(v) for v in lo + hi):
        raise IngestError("a numeric column holds an infinite value", field="uri")
    return lo, hi


def read_partition(path: str, encoding: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """One file as its encoded feature matrix (dense float64, laid out by ``encoding`` through
    the one ``Encoder``) and its raw labels (None-free)."""
    encoder = Encoder.from_dict(encoding)
    label = encoding["label"]
    table = parquet.read(path, [*encoder.names, label])
    columns = []
    for coder, name in zip(encoder.coders, encoder.names, strict=True):
        values = arrow_numpy(table.column(name))
        if coder.categorical:
            columns.append(_positions(values, coder.spec["categories"], name, path))
        else:
            columns.append(np.asarray(values, dtype=np.float64))
    X = encoder.transform_columns(table.num_rows, columns, sparse=False)
    if not np.isfinite(X).all():
        raise IngestError(f"{path}: a feature holds a missing or infinite value", field="uri")
    return X, labels_of(arrow_numpy(table.column(label)))


def _positions(values: np.ndarray, categories: list[str], name: str, path: str) -> np.ndarray:
    lookup = {c: i for i, c in enumerate(categories)}
    idx = np.fromiter((lookup.get(v, -1) for v in values), dtype=np.int64, count=len(values))
    if len(idx) and idx.min() < 0:
        bad = values[int(np.argmin(idx))]
        raise IngestError(f"{path}: column {name!r} holds {bad!r}, which the dataset's first "
                          "pass did not see (was the file changed since it was registered?)",
                          field="uri", column=name)
    return idx


def labels_of(values: np.ndarray) -> np.ndarray:
    """Labels typed as an upload's (``app.ingest.labels``): int64, float64 or strings."""
    if values.dtype.kind in "iub":
        return values.astype(np.int64)
    if values.dtype.kind == "f":
        whole = np.all(values == np.round(values)) and np.all(np.abs(values) < 2**53)
        return values.astype(np.int64) if whole else values.astype(np.float64)
    return np.asarray([str(v) for v in values], dtype=str)
