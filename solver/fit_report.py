"""What a fit did, as every estimator declares it (``MarginClassifier.fit_report()`` and
``model_summary()``), from the fitted attributes its class persists (``_json_attrs``,
``_array_attrs``) and its parameters: callers read these, never probe an estimator's
attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FitReport:
    """n_iter: iterations (the most over one-vs-rest tasks; 0 for closed-form solvers);
    history: the per-iteration records (empty where the solver keeps none); stopped_early:
    the callback stopped the fit; converged: every task met the stopping rule (None for the
    algorithms that report none), with the rule's ``stop`` and ``tol`` parameters (None
    likewise) and the last step's relative change; warning: a fit that ran out of iterations
    in words (None otherwise); path: how MSVMAv computed the fit (its linear step's solver or
    kernel approximation, and the fit's counters), None for the algorithms with one path;
    warm_start: what an update (``MSVMAv.update_fit``) reused and saved against a cold fit
    (``solver.incremental``), None for a fit that was not an update."""

    n_iter: int
    history: list[dict] = field(default_factory=list)
    stopped_early: bool = False
    converged: bool | None = None
    stop: str | None = None
    tol: float | None = None
    last_relative_change: float | None = None
    warning: str | None = None
    path: dict[str, Any] | None = None
    warm_start: dict[str, Any] | None = None


def iterations(n_iter: Any) -> int:
    """``n_iter_`` (an int, or one per task) as one count; 0 when there is none."""
    return int(np.max(n_iter)) if n_iter is not None and np.size(n_iter) else 0


def expansion_summary(est: Any) -> dict[str, Any]:
    """A kernel model's expansion in numbers (terms, width, coefficient norms; MSVMAv's rank
    and kernel error; a Nystroem-like feature map's dimension), from its fitted attributes."""
    info: dict[str, Any] = {"kernel": est.kernel, "gamma": est.gamma_}
    rank = getattr(est, "rank_", None)
    if rank is not None:  # MSVMAv: the kernel path taken and its error
        info.update(rank=int(rank), kernel_error=float(est.kernel_error_))
    dual = est.dual_coef_
    if dual is not None:
        dual = np.asarray(dual, dtype=np.float64)
        info.update(
            n_expansion_terms=int(dual.shape[0]),
            dual_coef_l1=float(np.abs(dual).sum()),
            dual_coef_l2=float(np.linalg.norm(dual)),
            nonzero_terms=int(np.count_nonzero(np.any(np.atleast_2d(dual.T).T != 0, axis=1))),
        )
    if est.coef_ is not None:  # linear in a mapped space
        coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
        info["feature_space_dim"] = int(coef.shape[1])
        info["coef_norm"] = [float(np.linalg.norm(c)) for c in coef]
    intercept = getattr(est, "intercept_", None)
    if intercept is not None:
        info["intercept"] = np.atleast_1d(np.asarray(intercept, dtype=np.float64)).tolist()
    return {"kernel_summary": info}


def weights_summary(est: Any) -> dict[str, Any]:
    """A linear model's weight vector(s) and intercept(s), in the scaled feature space."""
    coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
    intercept = getattr(est, "intercept_", None)
    b = np.zeros(len(coef)) if intercept is None else intercept
    return {"weights": {"coef": coef.tolist(),
                        "intercept": np.atleast_1d(np.asarray(b)).tolist(),
                        "norm": [float(np.linalg.norm(c)) for c in coef]}}
