"""Class and sample weights of a fit (docs/algorithm.md, "Weights"): scikit-learn's semantics.

``class_weight`` is None, ``"balanced"`` (each class weighs n / (k n_c), scikit-learn's
``compute_sample_weight("balanced", y)``) or a mapping class -> weight (classes left out
weigh 1). A mapping's keys are the labels themselves or their string forms (a mapping read
back from JSON has string keys). ``sample_weight`` is (n,) non-negative and finite; the
weight of row i is its sample weight times its class's weight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.utils.class_weight import compute_sample_weight

CLASS_WEIGHTS = ("balanced",)


def class_weight_map(class_weight: Mapping, classes: np.ndarray) -> dict[Any, float]:
    """{class label: weight} of a mapping whose keys are labels or their string forms;
    ValueError naming ``class_weight`` for a key that is no class, or a weight that is
    negative or not finite."""
    labels = {str(c): c for c in np.asarray(classes).tolist()}
    resolved: dict[Any, float] = {}
    for key, weight in class_weight.items():
        label = key if key in labels.values() else labels.get(str(key), _missing)
        if label is _missing:
            raise ValueError(f"class_weight: {key!r} is not a class of y; the classes are "
                             f"{list(labels.values())!r}")
        try:
            value = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"class_weight: the weight of {key!r} must be a number, got "
                             f"{weight!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"class_weight: the weight of {key!r} must be finite and "
                             f">= 0, got {weight!r}")
        resolved[label] = value
    return resolved


_missing = object()


def checked_sample_weight(sample_weight: Any, n: int) -> np.ndarray:
    """``sample_weight`` as an (n,) float64 array; ValueError naming it unless it has n
    finite, non-negative values."""
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"sample_weight: expected shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("sample_weight: every weight must be finite")
    if np.any(w < 0):
        raise ValueError("sample_weight: every weight must be >= 0")
    return w


def fit_weights(class_weight: Any, sample_weight: Any, y: np.ndarray) -> np.ndarray | None:
    """The (n,) row weights of a fit on labels y, or None when every row weighs the same
    (no weights given, or equal ones: the unweighted fit is then the same fit, exactly).

    ValueError naming the argument for bad weights, and when a class's rows weigh 0 in all."""
    if class_weight is None and sample_weight is None:
        return None
    y = np.asarray(y)
    classes, y_idx = np.unique(y, return_inverse=True)
    w = np.ones(y.size) if sample_weight is None else checked_sample_weight(sample_weight, y.size)
    if isinstance(class_weight, Mapping):
        w = w * compute_sample_weight(class_weight_map(class_weight, classes), y)
    elif class_weight is not None:
        w = w * compute_sample_weight(class_weight, y)
    if not np.any(w > 0):
        raise ValueError("sample_weight: every row's weight is zero; some must be positive")
    totals = np.bincount(y_idx, weights=w, minlength=classes.size)
    if np.any(totals <= 0):
        empty = classes.tolist()[int(np.flatnonzero(totals <= 0)[0])]
        where = "class_weight" if class_weight is not None else "sample_weight"
        raise ValueError(f"{where}: the rows of class {empty!r} weigh 0 in all; every class "
                         "needs a positive total weight")
    return None if np.all(w == w[0]) else w


__all__ = ["CLASS_WEIGHTS", "checked_sample_weight", "class_weight_map", "fit_weights"]
