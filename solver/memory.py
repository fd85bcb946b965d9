"""How much memory a fit will take, before it is started.

``estimate_fit("msvmav", n_samples, n_features, nnz, params)`` returns a ``FitEstimate``: the
predicted peak extra memory of ``fit()`` beyond the input X, the path fit() will take (the same
path-choice functions the estimators call: ``MSVMAv.linear_path`` and ``MSVMAv.kernel_path``)
and advice for when it is too large. ``nnz=None`` means dense input.

Every estimator checks its own estimate at the start of ``fit`` and raises ``FitTooLarge``
(a ValueError) before allocating anything proportional to it when the estimate exceeds the
limit: the machine's physical memory, or the bytes given to ``memory_limit`` within that
context. The figures are upper bounds by design where the path's size depends on the data
(the low-rank kernel's rank is taken at its cap; a LIBSVM model at every row a support vector).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._footprint import (
    FitEstimate,
    FitTooLarge,
    fit_memory_limit,
    gib,
    memory_limit,
    physical_memory,
)
from .model_selection import estimator_class
from .params import validate_params

__all__ = ["FitEstimate", "FitTooLarge", "estimate_fit", "fit_memory_limit", "gib",
           "memory_limit", "physical_memory"]


def estimate_fit(algorithm: str, n_samples: int, n_features: int, nnz: int | None,
                 params: Mapping[str, Any], *, n_classes: int = 2) -> FitEstimate:
    """Predicted peak extra memory of ``fit`` for ``algorithm`` ("msvmav" or a comparator's
    name) with constructor ``params`` on an (n_samples, n_features) input holding ``nnz``
    stored values (None: dense), with ``n_classes`` labels (one-vs-rest above two).

    Raises ValueError for an unknown algorithm or invalid parameters (as fit would)."""
    est = estimator_class(algorithm)(**dict(params))
    validate_params(est)
    return est.fit_estimate(int(n_samples), int(n_features),
                            None if nnz is None else int(nnz), int(n_classes))
