"""Raw label tokens -> a typed label array, plus class summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .text import parse_number


def convert_labels(tokens: Sequence[str] | np.ndarray) -> np.ndarray:
    """int64 if every label is an integer (e.g. "-1", "1.0"), float64 if every label is a
    finite number, otherwise the strings themselves (numpy unicode)."""
    if isinstance(tokens, np.ndarray) and tokens.dtype.kind == "f":
        values = tokens
    else:
        parsed = [parse_number(t) if isinstance(t, str) else float(t) for t in tokens]
        if any(v is None or not math.isfinite(v) for v in parsed):
            return np.asarray([str(t) for t in tokens], dtype=str)
        values = np.asarray(parsed, dtype=np.float64)
    if len(values) and np.all(values == np.round(values)) and np.all(np.abs(values) < 2**53):
        return values.astype(np.int64)
    return values.astype(np.float64)


def class_summary(y: np.ndarray) -> tuple[list, list[int]]:
    """Sorted distinct labels as plain Python values, and how often each occurs."""
    classes, counts = np.unique(y, return_counts=True)
    return classes.tolist(), [int(c) for c in counts]


#: A label with more distinct values than this share of the rows (and more than two) is not a
#: set of classes: an identifier or a measurement, whatever its type (docs/ingest.md).
MAX_CLASS_SHARE = 0.2


def label_problem(classes: Sequence, counts: Sequence[int], column: str | None) -> str | None:
    """Why the label column cannot be a classification target, or None. Refused: a
    continuous label (``sklearn.utils.multiclass.type_of_target`` of its values says so), a
    class with fewer than 2 rows, or more than ``MAX_CLASS_SHARE`` of the rows as classes."""
    from sklearn.utils.multiclass import type_of_target

    n_rows, n_classes = int(sum(counts)), len(classes)
    if n_classes < 2:
        return None  # (the single-class message says more)
    values = np.asarray(classes)
    target = type_of_target(values) if values.dtype.kind in "iuf" else (
        "binary" if n_classes == 2 else "multiclass")
    where = f"the label column {column!r}" if column is not None else "the label"
    looks = f"type_of_target {target!r}, {n_classes} distinct values in {n_rows} rows"
    remedy = ("; choose another column with the label option (a name or a 0-based index), "
              "or bin this one into classes before uploading")
    if target == "continuous":
        return f"{where} is continuous ({looks}): a classifier needs classes{remedy}"
    if n_classes > 2 and n_classes > MAX_CLASS_SHARE * n_rows:
        return (f"{where} has too many classes for the data ({looks}; at most "
                f"{MAX_CLASS_SHARE:.0%} of the rows may be classes){remedy}")
    single = [c for c, k in zip(classes, counts, strict=True) if k < 2]
    if single:
        shown = ", ".join(repr(c) for c in single[:5]) + (" …" if len(single) > 5 else "")
        return (f"{where} has {len(single)} classes with a single row ({shown}; {looks}): "
                f"every class needs at least 2 rows{remedy}")
    return None
