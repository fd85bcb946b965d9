"""One training run, free of HTTP and SQL: split, scale, (search,) fit, measure margins.

``train`` receives the stored dataset arrays and the job's params and returns a ``TrainOutcome``
holding everything the worker persists as a model row plus npy blobs. Any algorithm of
``solver.ALGORITHMS`` is fitted the same way (they share the ``MarginClassifier`` API); with a
``search`` the hyper-parameters are first chosen by ``cross_validate_grid`` on the scaled
training part.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from app.core.jsonable import jsonable
from solver.msvmav import FeatureScaleWarning
from solver.scaling import MinMaxScaling

DEFAULT_ALGORITHM = "msvmav"
HYPER_PARAMETERS = (
    "kernel",
    "alpha",
    "beta",
    "gamma",
    "degree",
    "coef0",
    "max_iter",
    "tol",
    "fit_intercept",
    "approximation",
    "kernel_tol",
    "n_components",
)
HISTORY_POINTS = 50

Matrix = np.ndarray | sp.csr_matrix
FitCallback = Callable[[dict[str, Any]], bool | None]
CellCallback = Callable[[int, int], Any]


class TrainingError(ValueError):
    """The job's data or parameters cannot be trained on (reported as the job's error)."""


@dataclass
class TrainOutcome:
    estimator: Any
    scaling: MinMaxScaling | None
    classes: list[Any]
    n_train: int
    n_test: int
    holdout_accuracy: float | None
    fit_seconds: float
    n_iter: int
    summary: dict[str, Any]
    algorithm: str = DEFAULT_ALGORITHM
    params: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] | None = None


# What a FeatureScaleWarning means for a training job (the solver's own text advises a
# scikit-learn pipeline).
SCALE_NOTE = (
    "features are far outside [0, 1] (max |x| = {largest:.4g}) and scaling is none: MSVMAv "
    "assumes min-max scaled features and can fail silently on raw ones; train with "
    "scaling=minmax"
)


def _relay_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """The fit's FeatureScaleWarning as a note for the job and the model; any other warning
    is emitted again, as if it had not been caught."""
    notes = []
    for w in caught:
        if issubclass(w.category, FeatureScaleWarning):
            notes.append(SCALE_NOTE.format(largest=getattr(w.message, "largest", float("nan"))))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return notes


def holdout_sizes(n: int, test_fraction: float) -> tuple[int, int]:
    """(n_train, n_test) as scikit-learn's train_test_split computes them."""
    n_test = math.ceil(test_fraction * n)
    return n - n_test, n_test


def split_indices(
    y: np.ndarray, test_fraction: float | None, seed: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded, stratified when every class has at least two rows; no hold-out when
    ``test_fraction`` is None."""
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


def _rows(X: Matrix, idx: np.ndarray) -> Matrix:
    return X[idx]


def estimator_params(params: dict[str, Any]) -> dict[str, Any]:
    """The estimator's keyword arguments from a job's params (without ``random_state``): the
    ``estimator_params`` resolved at submission, or — jobs queued before algorithms existed —
    the top-level MSVMAv fields."""
    if "estimator_params" in params:
        return dict(params["estimator_params"])
    return {k: params[k] for k in HYPER_PARAMETERS if k in params}


def train(
    X: Matrix,
    y: np.ndarray,
    params: dict[str, Any],
    callback: FitCallback | None = None,
    *,
    search_callback: CellCallback | None = None,
    n_jobs: int = 1,
) -> TrainOutcome:
    """Fit ``params["algorithm"]`` (default MSVMAv) on (X, y) with the job's ``params`` (see
    app.jobs.schemas.TrainRequest and app.jobs.service.submit_train).

    X: (n, d) float64 ndarray or CSR; y: (n,) raw labels. ``callback(info)`` is the final fit's
    per-iteration callback; ``search_callback(done_cells, total_cells)`` is called during a
    search (raising aborts it); ``n_jobs`` processes run the search.
    """
    from solver.model_selection import cross_validate_grid, estimator_class

    algorithm = params.get("algorithm") or DEFAULT_ALGORITHM
    train_idx, test_idx = split_indices(y, params.get("test_fraction"), params.get("seed"))
    X_train, y_train = _rows(X, train_idx), y[train_idx]
    if len(np.unique(y_train)) < 2:
        raise TrainingError("the training part has a single class; nothing to separate")

    scaling = MinMaxScaling.fit(X_train) if params.get("scaling", "minmax") == "minmax" else None
    if scaling is not None:
        X_train = scaling.transform(X_train)

    chosen = estimator_params(params)
    kernel = chosen.pop("kernel", "linear")
    cls = estimator_class(algorithm)
    if "random_state" in cls().get_params():
        chosen["random_state"] = params.get("seed")
    search_summary = None
    spec = params.get("search")
    if spec:
        grid = spec.get("grid_values") or spec.get("grid", "quick")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            result = cross_validate_grid(
                algorithm,
                X_train,
                y_train,
                kernel=kernel,
                grid=grid,
                cv=int(spec.get("cv", 5)),
                random_state=spec.get("seed", 0),
                n_jobs=n_jobs,
                callback=search_callback,
                params=chosen,
            )
        chosen = {**chosen, **result.best_params}
        search_summary = jsonable(
            {
                "best_params": result.best_params,
                "best_score": result.best_score,
                "best_index": result.best_index,
                "cv": result.cv,
                "seed": result.random_state,
                "grid": spec.get("grid", "quick"),
                "grid_values": grid,
                "fixed_params": result.fixed_params,
                "n_configs": len(result.table),
                "seconds": result.seconds,
                "table": result.table,
            }
        )

    est = cls(kernel=kernel, **chosen)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("always", FeatureScaleWarning)
        est.fit(X_train, y_train, callback=callback)
    fit_seconds = time.perf_counter() - start
    notes = _relay_warnings(caught)

    decision = est.decision_function(X_train)
    if not np.all(np.isfinite(decision)) or not np.any(decision):  # e.g. 1e308 with scaling none
        raise TrainingError(
            "the fit produced a degenerate model (non-finite or all-zero decision values); "
            "the features are probably too large: use scaling=minmax or rescale the data"
        )
    train_margins = est.margins(X_train, y_train, decision=decision)  # (includes the accuracy)
    summary: dict[str, Any] = {
        "train_margins": jsonable(train_margins),
        "train_accuracy": train_margins["accuracy"],
        "history": history_summary(list(getattr(est, "history_", None) or ()), est),
        "scaling": scaling_summary(scaling),
        "search": search_summary,
        "warnings": notes,
        **describe_estimator(est, {"kernel": kernel}),
    }
    holdout_accuracy = None
    if len(test_idx):
        X_test, y_test = _rows(X, test_idx), y[test_idx]
        if scaling is not None:
            X_test = scaling.transform(X_test)
        # rows whose label the model never saw have no margin and are always mispredicted
        known = np.isin(y_test, est.classes_)
        margins = est.margins(X_test[known], y_test[known]) if known.any() else None
        holdout_accuracy = margins["accuracy"] * known.mean() if margins else 0.0
        summary["holdout"] = {
            "n": int(len(test_idx)),
            "accuracy": holdout_accuracy,
            "margins": jsonable(margins),
        }
    else:
        summary["holdout"] = None

    used = jsonable(est.get_params(deep=False))
    used.pop("random_state", None)
    return TrainOutcome(
        estimator=est,
        scaling=scaling,
        classes=jsonable(est.classes_.tolist()),
        n_train=int(len(train_idx)),
        n_test=int(len(test_idx)),
        holdout_accuracy=holdout_accuracy,
        fit_seconds=fit_seconds,
        n_iter=_n_iter(est),
        summary=summary,
        algorithm=algorithm,
        params=used,
        search=search_summary,
    )


def _n_iter(est: Any) -> int:
    """Iterations of the fit (the most over one-vs-rest tasks); 0 for closed-form solvers."""
    n_iter = getattr(est, "n_iter_", None)
    return int(np.max(n_iter)) if n_iter is not None and np.size(n_iter) else 0


def history_summary(history: list[dict[str, Any]], est: Any) -> dict[str, Any]:
    """At most HISTORY_POINTS evenly spaced iterations plus the last one."""
    n = len(history)
    keep = (
        sorted(set(np.linspace(0, n - 1, min(n, HISTORY_POINTS)).astype(int).tolist())) if n else []
    )
    fields = ("iteration", "task", "theta", "semivariance", "objective", "active")
    return jsonable(
        {
            "n_records": n,
            "stopped_early": bool(getattr(est, "stopped_early_", False)),
            "last": history[-1] if n else None,
            "trace": [{k: history[i].get(k) for k in fields} for i in keep],
        }
    )


def describe_estimator(est: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Linear kernel: the weight vector(s) (in scaled feature space). Kernels: a summary of the
    expansion (terms, gamma, coefficient norms)."""
    if params.get("kernel", "linear") == "linear" and getattr(est, "coef_", None) is not None:
        coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
        intercept = np.atleast_1d(np.asarray(getattr(est, "intercept_", np.zeros(len(coef)))))
        return {
            "weights": jsonable(
                {
                    "coef": coef.tolist(),
                    "intercept": intercept.tolist(),
                    "norm": [float(np.linalg.norm(c)) for c in coef],
                }
            )
        }
    info: dict[str, Any] = {"kernel": params.get("kernel"), "gamma": getattr(est, "gamma_", None)}
    if getattr(est, "rank_", None) is not None:  # MSVMAv: the kernel path taken and its error
        info.update(rank=int(est.rank_), kernel_error=float(est.kernel_error_))
    dual = getattr(est, "dual_coef_", None)
    if dual is not None:
        dual = np.asarray(dual, dtype=np.float64)
        info.update(
            n_expansion_terms=int(dual.shape[0]),
            dual_coef_l1=float(np.abs(dual).sum()),
            dual_coef_l2=float(np.linalg.norm(dual)),
            nonzero_terms=int(np.count_nonzero(np.any(np.atleast_2d(dual.T).T != 0, axis=1))),
        )
    if getattr(est, "coef_", None) is not None:  # Nyström: linear in the mapped space
        coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
        info["feature_space_dim"] = int(coef.shape[1])
        info["coef_norm"] = [float(np.linalg.norm(c)) for c in coef]
    intercept = getattr(est, "intercept_", None)
    if intercept is not None:
        info["intercept"] = np.atleast_1d(np.asarray(intercept, dtype=np.float64)).tolist()
    return {"kernel_summary": jsonable(info)}


def scaling_summary(scaling: MinMaxScaling | None) -> dict[str, Any]:
    """The per-feature ranges the min-max scaling maps to [0, 1]."""
    if scaling is None:
        return {"method": "none"}
    return jsonable(
        {
            "method": "minmax",
            "data_min": scaling.data_min.tolist(),
            "data_max": scaling.data_max.tolist(),
        }
    )
