"""One training run, free of HTTP and SQL: hold-out split, then ``solver.protocol`` (scale,
(search,) refit, score), then what the model keeps of it.

``train`` receives the stored dataset arrays and the job's ``FitPlan``
(app.training.fit_plan) and returns a ``TrainOutcome`` holding everything the worker persists
as a model row plus npy blobs. Any algorithm of ``solver.ALGORITHMS`` is fitted the same way
(they share the ``MarginClassifier`` API).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from app.core.jsonable import jsonable
from app.ingest.imputation import apply_fills, fit_fills, needs_fit
from app.models.schemas import TrainOutcome
from app.serving.evaluating import baseline_warning, metrics_of
from app.training.fit_plan import FitPlan, SearchPlan
from app.training.warm import Start, fit_from
from solver import (
    CALIBRATION_FOLDS,
    MIN_HOLDOUT_ROWS,
    AutoResult,
    Fit,
    FitReport,
    MinMaxScaling,
    Plan,
    SearchResult,
    cross_validated_decisions,
    fit_plan,
    split_indices,
    split_rows,
)

HISTORY_POINTS = 50

Matrix = np.ndarray | sp.csr_matrix
FitCallback = Callable[[dict[str, Any]], bool | None]
CellCallback = Callable[[int, int], Any]


DEGENERATE = (
    "the fit produced a degenerate model (non-finite or all-zero decision values); "
    "the features are probably too large: use scaling=minmax or rescale the data"
)


class TrainingError(ValueError):
    """The job's data or parameters cannot be trained on (reported as the job's error)."""


# What a FeatureScaleWarning means for a training job (the solver's own text advises a
# scikit-learn pipeline).
SCALE_NOTE = (
    "features are far outside [0, 1] (max |x| = {largest:.4g}) and scaling is none: MSVMAv "
    "assumes min-max scaled features and can fail silently on raw ones; train with "
    "scaling=minmax"
)


def train(
    X: Matrix,
    y: np.ndarray,
    job: FitPlan,
    callback: FitCallback | None = None,
    *,
    search_callback: CellCallback | None = None,
    n_jobs: int = 1,
    overwrite_X: bool = False,
    encoding: dict[str, Any] | None = None,
    sample_weight: np.ndarray | None = None,
    start: Start | None = None,
    split: tuple[np.ndarray, np.ndarray] | None = None,
) -> TrainOutcome:
    """Fit ``job.algorithm`` on (X, y) as the job's plan says, through ``solver.protocol``:
    hold-out split, scale, (search,) refit, score.

    X: (n, d) float64 ndarray or CSR; y: (n,) raw labels. ``callback(info)`` is the final fit's
    per-iteration callback; ``search_callback(done_cells, total_cells)`` is called during a
    search (raising aborts it); ``n_jobs`` processes run the search. ``overwrite_X``: X (dense
    float64) is the caller's to spend: the training rows are moved to its front, the test rows
    behind them, and both scaled there, so neither part is a copy (the same results).
    ``encoding``: the dataset's; when its columns wait for imputation fills, they are fitted on
    the training part only, fill both parts, and the outcome's ``encoding`` holds them.
    ``sample_weight`` (n,): the rows' weights (the training part's weigh the fit and its
    calibration; the hold-out's metrics are unweighted). ``start``: a retrain's parent (warm
    start, app.training.warm); ``split``: its sorted (train, test) rows (app.loop.runner)."""
    plan = job.protocol()
    train_idx, test_idx = split or split_indices(y, job.test_fraction, plan.seed)
    y_train = y[train_idx]
    w_train = None if sample_weight is None else np.asarray(sample_weight)[train_idx]
    if len(np.unique(y_train)) < 2:
        raise TrainingError("the training part has a single class; nothing to separate")
    X_train, X_test = split_rows(X, train_idx, test_idx, overwrite=overwrite_X)
    del X
    if encoding is not None and needs_fit(encoding):
        encoding = fit_fills(X_train, encoding)
        X_train, X_test = apply_fills(X_train, encoding), apply_fills(X_test, encoding)
    else:
        encoding = None
    fitted, decision = _fit_finite(
        plan, X_train, y_train, callback=callback, search_callback=search_callback,
        n_jobs=n_jobs, in_place=overwrite_X, sample_weight=w_train, start=start,
    )
    del X_train  # scaled in place, or a scaled copy is kept in ``fitted``
    est = fitted.estimator
    search = search_summary(fitted.search, job.search)
    summary = _summary(fitted, y_train, decision, search)
    summary["sample_weight"] = weight_summary(job.weight_column, w_train)
    holdout = (_holdout(fitted, X_test, y[test_idx], in_place=overwrite_X)
               if len(test_idx) else None)
    del X_test
    if holdout is not None:
        holdout["rows"] = test_idx.tolist()  # the dataset's rows the model did not train on
    _add_holdout(summary, holdout)
    if holdout is None:
        _add_cross_validated(summary, fitted, y_train, plan.seed, w_train)
    used = jsonable(est.get_params(deep=False))
    used.pop("random_state", None)
    return TrainOutcome(
        estimator=est,
        scaling=fitted.scaling,
        classes=jsonable(est.classes_.tolist()),
        n_train=int(len(train_idx)),
        n_test=int(len(test_idx)),
        holdout_accuracy=holdout["accuracy"] if holdout else None,
        fit_seconds=fitted.fit_seconds,
        n_iter=est.fit_report().n_iter,
        summary=summary,
        algorithm=fitted.search.algorithm if fitted.search is not None else plan.algorithm,
        params=used,
        search=search,
        encoding=encoding,
    )


def _fit_finite(
    plan: Plan,
    X_train: Matrix,
    y_train: np.ndarray,
    *,
    callback: FitCallback | None,
    search_callback: CellCallback | None,
    n_jobs: int,
    in_place: bool,
    sample_weight: np.ndarray | None = None,
    start: Start | None = None,
) -> tuple[Fit, np.ndarray]:
    """``fit_plan`` of the plan (``start``: ``fit_from`` it) and the fitted model's decision
    values on its training rows; a TrainingError(DEGENERATE) when the fit met non-finite values
    or its decisions are non-finite or all zero (e.g. features of 1e308 with scaling none)."""
    try:
        if start is not None:
            fitted = fit_from(start, plan, X_train, y_train, callback=callback,
                              in_place=in_place, sample_weight=sample_weight)
        else:
            fitted = fit_plan(
                plan, X_train, y_train, callback=callback, search_callback=search_callback,
                n_jobs=n_jobs, in_place=in_place, sample_weight=sample_weight,
            )
    except ValueError as exc:  # the calibration's folds met the fit's non-finite values
        if "infs or NaNs" not in str(exc):
            raise
        raise TrainingError(DEGENERATE) from None
    decision = fitted.estimator.decision_function(fitted.X_train)
    if not np.all(np.isfinite(decision)) or not np.any(decision):
        raise TrainingError(DEGENERATE)
    return fitted, decision


def _holdout(
    fitted: Fit, X_test: Matrix, y_test: np.ndarray, *, in_place: bool
) -> dict[str, Any]:
    """The hold-out part's accuracy, margin statistics and ``evaluation`` (every metric of
    ``solver.evaluation.evaluate``, through app.serving.evaluating as POST /models/{ref}/evaluate
    computes it), from one decision pass on its rows scaled like the training part."""
    est = fitted.estimator
    Xt = fitted.transform(X_test, copy=not in_place)
    D = est.decision_function(Xt)
    P = est.probabilities(D) if est.calibrated else None
    index = est.predicted_index(D)
    accuracy = float(np.mean(est.classes_[index] == y_test))
    known = np.isin(y_test, est.classes_)
    margins = None
    if known.all():
        margins = est.margins(Xt, y_test, decision=D)
    elif known.any():
        margins = est.margins(Xt[known], y_test[known], decision=D[known])
    return {
        "n": int(len(y_test)),
        "accuracy": accuracy,
        "margins": jsonable(margins),
        "evaluation": metrics_of(est.classes_, y_test, index, D, P),
    }


def _add_holdout(summary: dict[str, Any], holdout: dict[str, Any] | None) -> None:
    """The summary's ``holdout`` and ``evaluation``, and the warning of a model that does not
    beat the majority-class baseline on it (the job's message says it too)."""
    summary["holdout"] = holdout
    summary["evaluation"] = holdout.pop("evaluation") if holdout else None
    warning = baseline_warning(summary["evaluation"])
    if warning is not None:
        summary["warnings"].append(warning)


NO_HOLDOUT = (
    "no hold-out was kept ({why}): `evaluation` holds {folds}-fold cross-validated metrics of "
    "the training rows (out-of-fold decision values, no probabilities){searched}"
)


def _add_cross_validated(
    summary: dict[str, Any], fitted: Fit, y_train: np.ndarray, seed: int | None,
    sample_weight: np.ndarray | None = None,
) -> None:
    """Without a hold-out, the summary's ``evaluation`` from out-of-fold decision values of
    the training rows (``solver.calibration.cross_validated_decisions``: stratified folds,
    each scored by a clone fitted on the others), with a warning saying so."""
    est = fitted.estimator
    n = len(y_train)
    why = (f"the dataset has {n} rows, fewer than {MIN_HOLDOUT_ROWS}"
           if n < MIN_HOLDOUT_ROWS else "test_fraction is null")
    try:
        D = (fitted.search.oof if isinstance(fitted.search, AutoResult)  # no more fits
             else cross_validated_decisions(est, fitted.X_train, y_train, random_state=seed,
                                            sample_weight=sample_weight))
    except ValueError as exc:  # a class with one row: no folds
        summary["warnings"].append(f"no hold-out was kept ({why}) and no cross-validated "
                                   f"metrics could be computed: {exc}")
        return
    if D is None:
        return
    if isinstance(fitted.search, AutoResult):  # a winner chosen at rung 0: its fold's rows
        rows = fitted.search.oof_rows
        D, y_train = D[rows], np.asarray(y_train)[rows]
    plain = _uncalibrated_index(D)
    summary["evaluation"] = {
        **metrics_of(est.classes_, y_train, plain, D, None),
        "source": "cross-validated",
    }
    folds = (fitted.search.cv if isinstance(fitted.search, AutoResult) else
             min(CALIBRATION_FOLDS, int(np.unique(y_train, return_counts=True)[1].min())))
    searched = ("; the hyper-parameters were chosen on the same rows, so they are optimistic"
                if summary.get("search") else "")
    summary["warnings"].append(NO_HOLDOUT.format(why=why, folds=folds, searched=searched))
    # the baseline and recall checks, on every model: here on the out-of-fold labels
    warning = baseline_warning(summary["evaluation"])
    if warning is not None:
        summary["warnings"].append(warning)


def weight_summary(column: str | None, w: np.ndarray | None) -> dict[str, Any] | None:
    """What a model keeps of its training rows' sample weights: the column they came from,
    their sum, range and mean, and how many rows weighed 0 (took no part in the fit); None
    without weights."""
    if w is None:
        return None
    return {"column": column, "n": int(w.size), "sum": float(w.sum()), "min": float(w.min()),
            "max": float(w.max()), "mean": float(w.mean()), "zero_rows": int(np.sum(w == 0))}


def _uncalibrated_index(D: np.ndarray) -> np.ndarray:
    """The classes the out-of-fold decision values predict (no calibrator fitted on them)."""
    D = np.asarray(D)
    return (D > 0).astype(np.intp) if D.ndim == 1 else np.argmax(D, axis=1)


def convergence(report: FitReport) -> dict[str, Any]:
    """Whether the fit met its stopping rule: MSVMAv's ``converged_``, the rule (``stop``:
    the relative change of SV/θ² or the step ||Δw||/√dim) and its ``tol``, the last step's
    relative change (null for algorithms without them; ``MarginClassifier.fit_report``)."""
    return jsonable({
        "converged": report.converged,
        "stop": report.stop,
        "last_relative_change": report.last_relative_change,
        "tol": report.tol,
    })


def _summary(
    fitted: Fit, y_train: np.ndarray, decision: np.ndarray, search: dict[str, Any] | None
) -> dict[str, Any]:
    """The model's summary: training margins, history, scaling, search, notes, weights."""
    est = fitted.estimator
    report = est.fit_report()
    train_margins = est.margins(fitted.X_train, y_train, decision=decision)  # with accuracy
    # The final fit's warning (the first): a calibrated fit's folds warn about the same rows.
    notes = [
        SCALE_NOTE.format(largest=getattr(w, "largest", float("nan")))
        for w in fitted.scale_warnings[:1]
    ]
    # a fit that ran out of iterations before meeting its stopping rule says so
    if report.warning:
        notes.append(report.warning)
    return {
        "train_margins": jsonable(train_margins),
        "train_accuracy": train_margins["accuracy"],
        "history": history_summary(report),
        "scaling": scaling_summary(fitted.scaling),
        "search": search,
        "warnings": notes,
        "fit_path": jsonable(report.path),
        "convergence": convergence(report),
        **jsonable(est.model_summary()),
    }


def search_summary(
    result: SearchResult | AutoResult | None, spec: SearchPlan | None
) -> dict[str, Any] | None:
    """What a model keeps of its search: the best configuration and the whole table (an auto
    search: every candidate with its folds, scores, time and status, the winner and why, the
    time against the budget)."""
    if result is None or spec is None:
        return None
    if isinstance(result, AutoResult):
        values: dict[str, list[Any]] = {"kernel": []}
        for row in result.table:
            for name, value in {"kernel": row["kernel"], **row["params"]}.items():
                if value not in values.setdefault(name, []):
                    values[name].append(value)
        return jsonable({**result.to_dict(), "grid": "auto", "grid_values": values,
                         "seed": result.random_state})
    return jsonable(
        {
            "best_params": result.best_params,
            "best_score": result.best_score,
            "best_index": result.best_index,
            "cv": result.cv,
            "seed": result.random_state,
            "grid": spec.grid,
            "grid_values": spec.values or spec.grid,
            "fixed_params": result.fixed_params,
            "n_configs": len(result.table),
            "seconds": result.seconds,
            "table": result.table,
        }
    )


def history_summary(report: FitReport) -> dict[str, Any]:
    """At most HISTORY_POINTS evenly spaced iterations plus the last one."""
    history = report.history
    n = len(history)
    keep = (
        sorted(set(np.linspace(0, n - 1, min(n, HISTORY_POINTS)).astype(int).tolist())) if n else []
    )
    fields = ("iteration", "task", "theta", "semivariance", "objective", "active")
    return jsonable(
        {
            "n_records": n,
            "stopped_early": report.stopped_early,
            "last": history[-1] if n else None,
            "trace": [{k: history[i].get(k) for k in fields} for i in keep],
        }
    )


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
