"""A retrain's warm start: the fit of a retraining job (app.loop) starts from its parent's
solution instead of MSVMAv's MAMC start.

The min-max scaling is refitted on the new training part (the feedback rows may lie outside
the parent's range, which its scaling would clip), exactly as a cold fit of the same rows
does; a linear parent's solution is then carried into the new coordinates exactly (the same
decision function, ``carry_linear``), so only the iterations differ from the cold fit, not the
problem. A kernel parent's dual coefficients live on its own training rows: with rows added
they do not apply, and MSVMAv starts afresh (``MSVMAv(warm_start=True)`` falls back by itself;
``Start.applies`` says which case it is). An algorithm without ``warm_start`` (a comparator)
is fitted cold.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from solver import Fit, MinMaxScaling, Plan, kernel_type

Matrix = np.ndarray | sp.csr_matrix


@dataclass(frozen=True)
class Start:
    """A retrain's parent: its fitted estimator and the scaling its solution lives in."""

    estimator: Any
    scaling: MinMaxScaling | None

    def applies(self) -> str:
        """How the fit will start: ``linear`` (the parent's weights, carried), ``kernel`` (a
        kernel parent: MSVMAv starts afresh when the rows changed) or ``none`` (no warm
        start for this algorithm)."""
        if "warm_start" not in self.estimator.get_params(deep=False):
            return "none"
        return "linear" if kernel_type(self.estimator.kernel).primal else "kernel"


def carry_linear(est: Any, old: MinMaxScaling | None, new: MinMaxScaling | None) -> None:
    """Rewrite a linear estimator's ``coef_`` (T, d) and ``intercept_`` (T,) from scaling
    ``old``'s coordinates into ``new``'s, so that its decision values on every unclipped row
    stay the same: z_old = (x - min_old) s_old and x = min_new + z_new / s_new give
    w_new = w s_old / s_new and b_new = b + w . (min_new - min_old) s_old."""
    if old is None or new is None:  # est: a fitted primal-kernel parent (Start.applies)
        return
    coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
    ratio = old.scale / new.scale
    shift = (new.data_min - old.data_min) * old.scale
    intercept = np.asarray(est.intercept_, dtype=np.float64) + coef @ shift
    est.coef_ = (coef * ratio).reshape(np.shape(est.coef_))
    est.intercept_ = intercept.reshape(np.shape(est.intercept_))


def fit_from(start: Start, plan: Plan, X_train: Matrix, y_train: np.ndarray, *,
             callback: Callable[[dict[str, Any]], Any] | None, in_place: bool,
             sample_weight: np.ndarray | None = None) -> Fit:
    """The plan's fit on the training part, started from ``start`` (see the module's
    docstring): X_train (n, d) unscaled, y_train (n,) labels; the scaling is refitted."""
    from solver import estimator_class

    scaling = MinMaxScaling.fit(X_train) if plan.scaling else None
    if scaling is not None:
        X_train = scaling.transform(X_train, copy=not in_place)
    fixed = plan.estimator_params()
    how = start.applies()
    if how == "none":
        est = estimator_class(plan.algorithm)(kernel=plan.kernel, **fixed)
    else:
        est = copy.deepcopy(start.estimator)
        est.set_params(kernel=plan.kernel, warm_start=True, **fixed)
        if how == "linear":
            carry_linear(est, start.scaling, scaling)
    weights = {} if sample_weight is None else {"sample_weight": sample_weight}
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X_train, y_train, callback=callback, **weights)
    seconds = time.perf_counter() - began
    if how != "none":
        est.set_params(warm_start=False)  # the stored model's parameters: a plain fit's
    return Fit(est, scaling, None, seconds, X_train)
