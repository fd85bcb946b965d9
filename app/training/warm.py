"""A retrain's warm start: the fit of a retraining job (app.loop) starts from its parent's
solution instead of MSVMAv's MAMC start.

Where the parent's training rows are known (``Start.update``: app.loop.runner finds them among
the retrain's rows), the fit is the library's update, ``MSVMAv.update_fit`` of those rows
with the ones the retrain holds out removed and its other training rows added, for linear and
kernel parents alike (docs/loop.md):

* a linear parent: the min-max scaling is refitted on the new training part (the feedback
  rows may lie outside the parent's range, which its scaling would clip), exactly as a cold
  fit of the same rows does, and the parent's solution is carried into the new coordinates
  exactly (the same decision function, ``carry_linear``; its column means with it), so only
  the iterations differ from the cold fit, not the problem;
* a kernel parent keeps its scaling (its dual coefficients and kernel width belong to its
  rows as it scaled them; rows outside its range are clipped, as its predictions clip them):
  the update starts from the parent's coefficients on its rows (0 on the added ones), with its
  width ``gamma_`` and kernel path.

``Start.cold`` is the comparison fit of the same problem (the same rows, scaling and width)
from MSVMAv's cold start. Without ``parent_rows`` (the dataset left out, or rows the parent's
checks refuse) a linear parent's carried solution starts ``fit(warm_start=True)`` and a kernel
parent starts afresh (``MSVMAv(warm_start=True)`` falls back by itself). An algorithm without
``warm_start`` (a comparator) is fitted cold.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from solver import Fit, MinMaxScaling, Plan, kernel_type

Matrix = np.ndarray | sp.csr_matrix


@dataclass(frozen=True)
class Start:
    """A retrain's parent: its fitted estimator and the scaling its solution lives in.

    ``update`` (None: unknown, no update): ``fitted``, the parent's training rows (X, y)
    unscaled, in its order; ``remove``, the indices of those the retrain's training part
    leaves out; ``order``, the training part's rows in the update's order (the kept parent
    rows, then the added ones). ``cold``: fit the update's problem cold (the saving's
    reference). ``notes`` is filled by ``fit_from``: ``update`` True when the library's update
    ran, else ``reason``."""

    estimator: Any
    scaling: MinMaxScaling | None
    update: dict[str, Any] | None = None
    cold: bool = False
    notes: dict[str, Any] = field(default_factory=dict, compare=False)

    def applies(self) -> str:
        """How the fit will start: ``linear`` (the parent's weights, carried), ``kernel`` (a
        kernel parent's coefficients, by the update) or ``none`` (no warm start for this
        algorithm)."""
        if "warm_start" not in self.estimator.get_params(deep=False):
            return "none"
        return "linear" if kernel_type(self.estimator.kernel).primal else "kernel"

    def keeps_scaling(self, plan: Plan) -> bool:
        """Whether the fit keeps the parent's scaling: a kernel parent updated on its rows."""
        return (plan.scaling and self.scaling is not None and self.update is not None
                and self.applies() == "kernel")


def carry_linear(est: Any, old: MinMaxScaling | None, new: MinMaxScaling | None) -> None:
    """Rewrite a linear estimator's ``coef_`` (T, d) and ``intercept_`` (T,) from scaling
    ``old``'s coordinates into ``new``'s, so that its decision values on every unclipped row
    stay the same: z_old = (x - min_old) s_old and x = min_new + z_new / s_new give
    w_new = w s_old / s_new and b_new = b + w . (min_new - min_old) s_old. Its training
    rows' column means ``feature_means_`` (which ``update_fit`` checks its rows against) move
    with them: m_new = (min_old + m_old / s_old - min_new) s_new."""
    if old is None or new is None:  # est: a fitted primal-kernel parent (Start.applies)
        return
    coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
    ratio = old.scale / new.scale
    shift = (new.data_min - old.data_min) * old.scale
    intercept = np.asarray(est.intercept_, dtype=np.float64) + coef @ shift
    est.coef_ = (coef * ratio).reshape(np.shape(est.coef_))
    est.intercept_ = intercept.reshape(np.shape(est.intercept_))
    means = est.feature_means_
    if means is not None:
        est.feature_means_ = (old.data_min + np.asarray(means) / old.scale
                              - new.data_min) * new.scale


def _cold_twin(start: Start, plan: Plan, fixed: dict[str, Any]) -> Any:
    """The parent's estimator unfitted, with the plan's parameters and (kernel) the parent's
    width: the update's problem from the cold start."""
    est = clone(start.estimator).set_params(kernel=plan.kernel, warm_start=False, **fixed)
    if start.applies() == "kernel" and start.update is not None:
        est.set_params(gamma=start.estimator.gamma_)
    return est


def _update(est: Any, start: Start, scaling: MinMaxScaling | None, X: Matrix, y: np.ndarray,
            weights: dict[str, Any], callback: Callable[[dict[str, Any]], Any] | None) -> None:
    """``update_fit`` of the parent's rows (scaled as X) to X, y (in the update's order: the
    kept parent rows first); a fit of X, y where the parent's checks refuse its rows
    (``notes["reason"]``)."""
    assert start.update is not None
    X_fit, y_fit = start.update["fitted"]
    if scaling is not None:  # unclipped: rows the retrain holds out may lie outside its range
        X_fit = scaling.transform(X_fit, clip=False)
    remove = start.update["remove"]
    m = X_fit.shape[0] - remove.size
    add = (X[m:], y[m:]) if X.shape[0] > m else None
    try:
        est.update_fit((X_fit, y_fit), add=add, remove=remove, callback=callback,
                       warm_folds=True, **weights)
        start.notes["update"] = True
    except ValueError as exc:
        if "fitted_rows" not in str(exc):
            raise
        start.notes.update(update=False, reason=str(exc))
        est.fit(X, y, callback=callback, **weights)


def fit_from(start: Start, plan: Plan, X_train: Matrix, y_train: np.ndarray, *,
             callback: Callable[[dict[str, Any]], Any] | None, in_place: bool,
             sample_weight: np.ndarray | None = None) -> Fit:
    """The plan's fit on the training part, started from ``start`` (see the module's
    docstring): X_train (n, d) unscaled, y_train (n,) labels; the scaling is refitted, or
    the kernel parent's kept (``Start.keeps_scaling``)."""
    from solver import estimator_class

    scaling = None
    if plan.scaling:
        scaling = start.scaling if start.keeps_scaling(plan) else MinMaxScaling.fit(X_train)
    if scaling is not None:
        X_train = scaling.transform(X_train, copy=not in_place)
    fixed = plan.estimator_params()
    how = start.applies()
    X_fit, y_fit = X_train, y_train  # the fit's rows: in the update's order with one
    if start.update is not None and how != "none":
        order = start.update["order"]
        X_fit, y_fit = X_train[order], y_train[order]
        weights_order = order
    else:
        weights_order = None
        if how != "none" and not start.cold:
            start.notes.update(update=False, reason=(
                "the parent's training rows are not among the retrain's (the dataset left "
                "out) or its hold-out rows are not recorded"))
    if how == "none":
        est = estimator_class(plan.algorithm)(kernel=plan.kernel, **fixed)
    elif start.cold:
        est = _cold_twin(start, plan, fixed)
    else:
        est = copy.deepcopy(start.estimator)
        est.set_params(kernel=plan.kernel, warm_start=True, **fixed)
        if how == "linear":
            carry_linear(est, start.scaling, scaling)
    weights = {} if sample_weight is None else {"sample_weight": (
        sample_weight if weights_order is None else sample_weight[weights_order])}
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if weights_order is not None and not start.cold:
            _update(est, start, scaling, X_fit, y_fit, weights, callback)
        else:
            est.fit(X_fit, y_fit, callback=callback, **weights)
    seconds = time.perf_counter() - began
    if how != "none":
        est.set_params(warm_start=False)  # the stored model's parameters: a plain fit's
    return Fit(est, scaling, None, seconds, X_train)
