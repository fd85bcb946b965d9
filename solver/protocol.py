"""One fit of the paper's protocol on a training part: scale → (search) → refit → score.

The service's ``/train`` (``app.training.pipeline``) and the experiments
(``solver.experiments``, one call per partition and algorithm) both fit through ``fit`` and
score through ``evaluate``, so the two cannot drift apart.

* **Scaling**: min-max fitted on the training part (``scaling=True``); every row it maps is
  clipped to [0, 1] — the training rows (in range by construction), the test rows and, in the
  service, every row predicted later. The search's folds are cut from the scaled training part
  (no per-fold re-scaling; see ``solver.model_selection``).
* **Seed**: ``seed`` is the one seed of a fit. It is the estimator's ``random_state`` (for the
  estimators that take one) and the search's fold assignment, unless ``cv_seed`` is given.
* **Warnings**: an iteration cap reached (``ConvergenceWarning``) is part of the protocol, not
  news; a ``FeatureScaleWarning`` of the refit is returned in ``Fit.scale_warnings``; any other
  warning passes through.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from .algorithms import estimator_class, takes_seed
from .auto_search import AutoResult, auto_search, calibrate_from_oof
from .kernels import kernel_type
from .model_selection import SearchResult, cross_validate_grid
from .msvmav import FeatureScaleWarning
from .scaling import MinMaxScaling

Matrix = np.ndarray | sp.csr_matrix
FitCallback = Callable[[dict[str, Any]], bool | None]
CellCallback = Callable[[int, int], Any]


@dataclass(frozen=True)
class Plan:
    """What one fit does.

    ``params``: fixed estimator parameters (not ``kernel``, not ``random_state``: ``seed`` sets
    it). ``grid``: None for no search, else "quick", "paper" or {parameter: values}, searched by
    ``cv``-fold cross-validation on the scaled training part; its best configuration overrides
    ``params`` in the refit. ``grid="auto"``: ``solver.auto_search`` races ``kernels`` and
    ``algorithms`` within ``budget_seconds``; the winner's algorithm and kernel are refitted
    and its out-of-fold decision values calibrate it."""

    algorithm: str = "msvmav"
    kernel: str = "linear"
    params: Mapping[str, Any] = field(default_factory=dict)
    grid: str | dict | None = None
    cv: int = 5
    seed: int | None = 0
    cv_seed: int | None = None
    scaling: bool = True
    # grid "auto" (solver.auto_search): its budget (None: the default for the rows), the
    # kernels and the algorithms that race
    budget_seconds: float | None = None
    kernels: tuple[str, ...] = ("linear", "rbf")
    algorithms: tuple[str, ...] = ("msvmav",)

    def estimator_params(self) -> dict[str, Any]:
        """The fixed keyword arguments of every fit: ``params`` plus the seed where it applies."""
        fixed = dict(self.params)
        if takes_seed(self.algorithm):
            fixed["random_state"] = self.seed
        return fixed

    @property
    def fold_seed(self) -> int | None:
        return self.seed if self.cv_seed is None else self.cv_seed


@dataclass
class Fit:
    """A fitted plan. ``X_train`` is the training part as the estimator saw it (scaled)."""

    estimator: Any
    scaling: MinMaxScaling | None
    search: SearchResult | AutoResult | None
    fit_seconds: float
    X_train: Matrix
    scale_warnings: list[FeatureScaleWarning] = field(default_factory=list)

    def transform(self, X: Matrix, *, copy: bool = True) -> Matrix:
        """Rows the fit did not see, mapped as the training part was (and clipped);
        ``copy=False``: a dense float64 X is mapped in place."""
        return self.scaling.transform(X, copy=copy) if self.scaling is not None else X


@dataclass
class Evaluation:
    """Scores on rows the fit did not see: ``accuracy`` over all of them (a label the model
    never saw counts as an error) and, when asked for, the margin statistics of the rows whose
    label the model knows (``estimator.margins``; None when there is none)."""

    n: int
    accuracy: float
    margins: dict[str, Any] | None = None


# /train keeps this stratified hold-out by default (``default_test_fraction``), from
# MIN_HOLDOUT_ROWS rows on: 20 rows at the least, below which one row moves accuracy by 5 %;
# a smaller data set is evaluated by cross-validation instead.
DEFAULT_TEST_FRACTION = 0.2
MIN_HOLDOUT_ROWS = 100


def default_test_fraction(n: int) -> float | None:
    """The hold-out fraction of a fit whose request gave none: DEFAULT_TEST_FRACTION from
    MIN_HOLDOUT_ROWS rows on, None (no hold-out: cross-validated metrics) below."""
    return DEFAULT_TEST_FRACTION if n >= MIN_HOLDOUT_ROWS else None


def holdout_sizes(n: int, test_fraction: float) -> tuple[int, int]:
    """(n_train, n_test) as scikit-learn's train_test_split and ShuffleSplit compute them."""
    n_test = math.ceil(test_fraction * n)
    return n - n_test, n_test


def split_indices(
    y: np.ndarray, test_fraction: float | None, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded hold-out split, stratified when every class has at least two rows; no hold-out
    when ``test_fraction`` is None. Both index arrays sorted."""
    n = len(y)
    if not test_fraction:
        return np.arange(n), np.arange(0)
    from sklearn.model_selection import train_test_split

    _, counts = np.unique(y, return_counts=True)
    n_train, n_test = holdout_sizes(n, test_fraction)
    stratify = y if counts.min() >= 2 and min(n_train, n_test) >= len(counts) else None
    train_idx, test_idx = train_test_split(
        np.arange(n), test_size=n_test, random_state=seed, stratify=stratify
    )
    return np.sort(train_idx), np.sort(test_idx)


# Rows moved at a time by ``split_rows(..., overwrite=True)``: the block's copy is at most this
# many bytes and a 32nd of X.
MOVE_BYTES = 4 * 1024 * 1024


def split_rows(
    X: Matrix, train_idx: np.ndarray, test_idx: np.ndarray, *, overwrite: bool = False
) -> tuple[Matrix, Matrix]:
    """(X[train_idx], X[test_idx]) for ``split_indices``'s sorted index arrays.

    ``overwrite=True`` with a writable dense X: the test rows are copied out, the training rows
    moved up to the front of X in their order (a block of rows at a time) and the test rows
    copied back behind them, so both parts are views of X (``X[:len(train_idx)]``, then the
    rest) and only the test rows are ever held twice, while splitting; X is overwritten. The
    values are those of the copies either way. CSR rows are always copied."""
    if not (overwrite and isinstance(X, np.ndarray) and X.flags.writeable and X.ndim == 2):
        return X[train_idx], X[test_idx]
    if len(train_idx) > 1 and not np.all(train_idx[1:] > train_idx[:-1]):
        raise ValueError("train_idx must be sorted and without repeats")
    X_test = X[test_idx]
    step = max(1, min(MOVE_BYTES, X.nbytes // 32) // max(1, X.shape[1] * X.itemsize))
    for start in range(0, len(train_idx), step):
        block = train_idx[start : start + step]
        if block[-1] != start + len(block) - 1:  # sorted and unique: else already in place
            X[start : start + len(block)] = X[block]  # rows at or after ``start``: unmoved
    if len(train_idx) + len(test_idx) != len(X):
        return X[: len(train_idx)], X_test
    X[len(train_idx) :] = X_test
    del X_test
    return X[: len(train_idx)], X[len(train_idx) :]


def search(
    plan: Plan,
    X_train: Matrix,
    y_train: np.ndarray,
    *,
    n_jobs: int | None = 1,
    callback: CellCallback | None = None,
) -> SearchResult:
    """The plan's cross-validated grid search on an (already scaled) training part."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return cross_validate_grid(
            plan.algorithm,
            X_train,
            y_train,
            kernel=plan.kernel,
            grid=plan.grid if plan.grid is not None else "quick",
            cv=plan.cv,
            random_state=plan.fold_seed,
            n_jobs=n_jobs,
            callback=callback,
            params=plan.estimator_params(),
        )


def fit(
    plan: Plan,
    X_train: Matrix,
    y_train: np.ndarray,
    *,
    callback: FitCallback | None = None,
    search_callback: CellCallback | None = None,
    n_jobs: int | None = 1,
    in_place: bool = False,
    sample_weight: np.ndarray | None = None,
) -> Fit:
    """Scale, search (when ``plan.grid`` is set), refit on the whole training part.

    X_train: (n, d) float64 ndarray or CSR, unscaled; y_train: (n,) labels. ``callback(info)``
    is the refit's per-iteration callback; ``search_callback(done_cells, total_cells)`` is
    called during the search (raising aborts it); ``n_jobs`` processes run the search.
    ``in_place``: a dense float64 X_train is scaled where it lies (the same values).
    ``sample_weight`` (n,): the rows' weights of the refit and of its calibration's folds
    (an estimator with a weighted form); a search chooses on unweighted folds."""
    scaling = MinMaxScaling.fit(X_train) if plan.scaling else None
    if scaling is not None:
        X_train = scaling.transform(X_train, copy=not in_place)
    if plan.grid == "auto":
        return _fit_auto(plan, X_train, y_train, scaling, callback=callback,
                         search_callback=search_callback, sample_weight=sample_weight)
    found = None
    chosen = plan.estimator_params()
    if plan.grid is not None:
        found = search(plan, X_train, y_train, n_jobs=n_jobs, callback=search_callback)
        chosen.update(found.best_params)
    est = estimator_class(plan.algorithm)(kernel=plan.kernel, **chosen)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("always", FeatureScaleWarning)
        est.fit(X_train, y_train, callback=callback, **_weights(sample_weight))
    seconds = time.perf_counter() - start
    return Fit(est, scaling, found, seconds, X_train, _relay(caught))


def _weights(sample_weight: np.ndarray | None) -> dict[str, Any]:
    """``fit``'s keyword arguments for the rows' weights (none without them)."""
    return {} if sample_weight is None else {"sample_weight": sample_weight}


def _fit_auto(plan: Plan, X_train: Matrix, y_train: np.ndarray, scaling: MinMaxScaling | None,
              *, callback: FitCallback | None, search_callback: CellCallback | None,
              sample_weight: np.ndarray | None = None) -> Fit:
    """``solver.auto_search`` on the scaled training part, then the winner refitted on all of
    it; a calibrated winner's calibrator is fitted on the race's out-of-fold decision values
    (``calibrate_from_oof``: no second round of folds). With ``sample_weight`` the race's
    folds were unweighted, so the weighted refit calibrates on folds of its own."""
    fixed = plan.estimator_params()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        found = auto_search(X_train, y_train, budget_seconds=plan.budget_seconds, cv=plan.cv,
                            random_state=plan.fold_seed, kernels=plan.kernels,
                            algorithms=plan.algorithms, params=fixed, callback=search_callback)
    method = fixed.pop("calibration", "none")
    if found.algorithm == "msvmav":
        chosen = {**fixed, **found.best_params}
        if kernel_type(found.kernel).takes_gamma:  # the path its race fits took
            for key, value in found.kernel_params.items():
                chosen.setdefault(key, value)
    else:  # a comparator: its own defaults besides the searched values and the seed
        chosen = {k: v for k, v in fixed.items() if k == "random_state"}
        chosen.update(found.best_params)
    weighted = sample_weight is not None
    est = estimator_class(found.algorithm)(
        kernel=found.kernel, calibration=method if weighted else "none", **chosen)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("always", FeatureScaleWarning)
        est.fit(X_train, y_train, callback=callback, **_weights(sample_weight))
    if method != "none" and not weighted:
        calibrate_from_oof(est, method, found.oof, y_train)
    seconds = time.perf_counter() - start
    return Fit(est, scaling, found, seconds, X_train, _relay(caught))


def _relay(caught: list[warnings.WarningMessage]) -> list[FeatureScaleWarning]:
    """The refit's FeatureScaleWarnings; any other warning is emitted again, as if it had not
    been caught."""
    kept = []
    for w in caught:
        if issubclass(w.category, FeatureScaleWarning):
            kept.append(w.message)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return kept


def evaluate(result: Fit, X_test: Matrix, y_test: np.ndarray, *, margins: bool = True,
             in_place: bool = False) -> Evaluation:
    """Score the fit on unscaled test rows (scaled and clipped here; ``in_place``: a dense
    float64 X_test where it lies)."""
    est = result.estimator
    X_test = result.transform(X_test, copy=not in_place)
    y_test = np.asarray(y_test)
    D = est.decision_function(X_test)
    accuracy = float(np.mean(est.classes_[est.predicted_index(D)] == y_test))
    known = np.isin(y_test, est.classes_)
    if not margins or not known.any():
        return Evaluation(n=len(y_test), accuracy=accuracy)
    if known.all():  # no copy of the rows
        stats = est.margins(X_test, y_test, decision=D)
    else:
        stats = est.margins(X_test[known], y_test[known], decision=D[known])
    return Evaluation(n=len(y_test), accuracy=accuracy, margins=stats)


__all__ = ["DEFAULT_TEST_FRACTION", "MIN_HOLDOUT_ROWS", "Evaluation", "Fit", "Plan",
           "default_test_fraction", "evaluate", "fit", "holdout_sizes", "search",
           "split_indices", "split_rows"]
