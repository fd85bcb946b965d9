"""How long a fit will take, before it is started: ``estimate_seconds`` from the cost model
of ``solver.fit_cost``, on the path the fit will take (the same path-choice functions
``MSVMAv.fit`` calls, as ``solver.memory.estimate_fit`` does for memory).

Only MSVMAv is modelled; other algorithms give None. The kernel paths are costed at
``max_iter`` iterations per one-vs-rest task. ``approximation="auto"`` above its exact-kernel
threshold is costed at the rank where its chooser stops pursuing ``kernel_tol``
(``fit_cost.budget_rank``, capped by the memory budget): an upper estimate for kernels whose
spectrum decays fast, while a kernel with no small rank can take up to the exact kernel's time
besides (the chooser then moves to it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .fit_cost import (
    budget_rank,
    exact_kernel_seconds,
    linear_seconds,
    low_rank_seconds,
)
from .model_selection import estimator_class
from .msvmav import MSVMAv
from .params import validate_params


def estimate_seconds(algorithm: str, n_samples: int, n_features: int, nnz: int | None,
                     params: Mapping[str, Any], *, n_classes: int = 2) -> float | None:
    """Predicted fit time in seconds of ``algorithm`` with constructor ``params`` on an
    (n_samples, n_features) input holding ``nnz`` stored values (None: dense); None when the
    algorithm is not modelled. Raises ValueError for invalid parameters (as fit would)."""
    est = estimator_class(algorithm)(**dict(params))
    validate_params(est)
    if not isinstance(est, MSVMAv):
        return None
    return msvmav_seconds(est, int(n_samples), int(n_features),
                          None if nnz is None else int(nnz), int(n_classes))


def msvmav_seconds(est: MSVMAv, n: int, d: int, nnz: int | None, n_classes: int = 2) -> float:
    """Predicted time of ``est.fit`` on n rows of d features (nnz stored values or dense)."""
    tasks = 1 if n_classes <= 2 else n_classes
    if est.kernel == "linear":
        D = d + (1 if est.fit_intercept else 0)  # noqa: N806
        stored = None if nnz is None else nnz + (n if est.fit_intercept else 0)
        return linear_seconds(n, D, stored, est.max_iter, tasks)
    path = est.kernel_path(n)
    if path == "exact":  # a precomputed kernel is given, not computed
        return exact_kernel_seconds(n, 0 if est.kernel == "precomputed" else d, est.max_iter,
                                    tasks)
    if path == "nystroem":
        return low_rank_seconds(n, d, min(est.n_components, n), est.max_iter, tasks)
    rank = est._max_rank(n)
    if est.approximation == "auto":
        rank = min(rank, budget_rank(n, d))
    return low_rank_seconds(n, d, rank, est.max_iter, tasks)
