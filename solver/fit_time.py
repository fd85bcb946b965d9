"""How long a fit will take, before it is started: ``estimate_seconds`` from the cost model
of ``solver.fit_cost``, on the path the fit will take (the same path-choice functions
``MSVMAv.fit`` calls, as ``solver.memory.estimate_fit`` does for memory).

Only MSVMAv is modelled; other algorithms give None. The kernel paths are costed at
``max_iter`` iterations per one-vs-rest task. ``approximation="auto"`` above its exact-kernel
threshold is costed at the rank where its chooser stops pursuing ``kernel_tol``
(``fit_cost.budget_rank``, capped by the memory budget): an upper estimate for kernels whose
spectrum decays fast, while a kernel with no small rank can take up to the exact kernel's time
besides (the chooser then moves to it).

``search_seconds`` costs a cross-validated search as ``solver.model_selection`` runs it: an
exact-kernel MSVMAv search computes each fold's Gram matrices (training and test rows) and
inverse once per gamma, shared by the other parameters' fits, then the refit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .fit_cost import (
    GRAM,
    INVERSE,
    budget_rank,
    exact_iterations_seconds,
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
    if est.kernel_kind.primal:
        D = d + (1 if est.fit_intercept else 0)  # noqa: N806
        stored = None if nnz is None else nnz + (n if est.fit_intercept else 0)
        return linear_seconds(n, D, stored, est.max_iter, tasks)
    path = est.kernel_path(n)
    if path == "exact":  # a precomputed kernel is given, not computed
        return exact_kernel_seconds(n, est.kernel_kind.entry_work(d), est.max_iter,
                                    tasks)
    if path == "nystroem":
        return low_rank_seconds(n, d, min(est.n_components, n), est.max_iter, tasks)
    rank = est._max_rank(n)
    if est.approximation == "auto":
        rank = min(rank, budget_rank(n, d))
    return low_rank_seconds(n, d, rank, est.max_iter, tasks)


def search_seconds(algorithm: str, n_samples: int, n_features: int, nnz: int | None,
                   fixed: Mapping[str, Any], configs: list[dict[str, Any]], cv: int, *,
                   n_classes: int = 2) -> float | None:
    """Predicted time of a ``cv``-fold search over ``configs`` (each merged over ``fixed``) on
    n rows, and the refit on all of them at the slowest configuration; None when the algorithm
    is not modelled. A binary exact-kernel MSVMAv search as ``model_selection._plan`` runs it:
    per fold and gamma one Gram matrix of the training part (n' = (cv - 1) n / cv rows), one
    of the test rows against it and one inverse, and per configuration the iterations only;
    any other search: ``cv`` fits per configuration on n' rows."""
    rows = n_samples * (cv - 1) // cv

    def one(config: dict[str, Any], n: int) -> float | None:
        part = None if nnz is None else int(nnz * n / max(n_samples, 1))
        return estimate_seconds(algorithm, n, n_features, part, {**fixed, **config},
                                n_classes=n_classes)

    refits = [one(c, n_samples) for c in configs]
    if any(s is None for s in refits):
        return None
    shared = _shared_kernel_search(algorithm, rows, n_samples - rows, n_features, fixed,
                                   configs, n_classes)
    if shared is not None:
        return cv * shared + max(refits)  # type: ignore[type-var]
    cells = [one(c, rows) for c in configs]
    if any(s is None for s in cells):
        return None
    return cv * sum(cells) + max(refits)  # type: ignore[arg-type]


def _shared_kernel_search(algorithm: str, rows: int, test: int, d: int,
                          fixed: Mapping[str, Any], configs: list[dict[str, Any]],
                          n_classes: int) -> float | None:
    """One fold's seconds where the search shares each gamma's kernel matrices and inverse
    (a binary MSVMAv whose fits take the exact path on the fold's rows), else None."""
    if algorithm != "msvmav" or n_classes > 2:
        return None
    ests = [estimator_class(algorithm)(**{**fixed, **c}) for c in configs]
    if any(e.kernel_kind.primal or e.kernel_path(rows) != "exact" for e in ests):
        return None
    width = ests[0].kernel_kind.entry_work(d)
    n, m = float(rows), float(test)
    gammas = {repr(c.get("gamma", fixed.get("gamma"))) for c in configs}
    per_gamma = GRAM * (n * n + n * m) * width + INVERSE * n**3
    return len(gammas) * per_gamma + sum(exact_iterations_seconds(rows, e.max_iter)
                                         for e in ests)
