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
