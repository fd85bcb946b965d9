"""A model's monitoring report: the training part's decision values (reference) against the
logged ones (live), their drift, and the margin statistics of the rows with feedback.

Decision values are the logged ``decision`` (binary: f(x); multi-class: the predicted class's
one-vs-rest score). θ̂ is the training part's average margin (``margin_statistics``' mean of
y·f(x) on the training rows). Drift: the two-sample Kolmogorov–Smirnov test
(``scipy.stats.ks_2samp``) between the reference and live decision values, flagged when its
p-value is below ``DRIFT_P_VALUE``; per feature, the binned test of
``app.monitoring.feature_drift``. ``model_figure`` draws the same window as a PNG
(``app.monitoring.figure``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy import stats
from scipy.stats import ks_2samp
from sqlalchemy.orm import Session

from app.core.problems import invalid
from app.core.runtime import runtime_of
from app.datasets import service as datasets
from app.models import service as models
from app.models.features import dataset_features, feature_match
from app.models.orm import Model
from app.monitoring import domain, feature_drift, figure, label_shift, reliability, samples, window
from app.monitoring import log as prediction_log
from app.serving.acquire import acquire
from app.serving.target import Target
from solver import QUANTILE_LEVELS, expected_accuracy, margin_statistics, split_indices

DRIFT_P_VALUE = 0.01
# The newest rows of the window a report reads at most.
MAX_REPORT_ROWS = 1_000_000


def _quantiles(values: np.ndarray) -> dict[str, float]:
    return {
        str(q): float(v)
        for q, v in zip(QUANTILE_LEVELS, np.percentile(values, QUANTILE_LEVELS), strict=True)
    }


def describe(decision: np.ndarray, theta: float | None) -> dict[str, Any]:
    """n, decision quantiles, and the share of |f(x)| < θ̂."""
    if decision.size == 0:
        return {"n": 0, "quantiles": None, "inside_margin_fraction": None}
    inside = None if theta is None else float(np.mean(np.abs(decision) < theta))
    return {"n": int(decision.size), "quantiles": _quantiles(decision),
            "inside_margin_fraction": inside}  # fmt: skip


def margins_of(decisions: np.ndarray, true_index: np.ndarray) -> np.ndarray:
    """y·f(x) of rows with true class indices: binary ``decisions`` (n,), ±1 for classes[1]
    and classes[0]; multi-class (n, k): the true class's score minus the best other's (the
    estimators' own definition, solver._base)."""
    if decisions.ndim == 1:
        return np.where(true_index == 1, 1.0, -1.0) * decisions
    rows = np.arange(decisions.shape[0])
    own = decisions[rows, true_index]
    other = decisions.copy()
    other[rows, true_index] = -np.inf
    return own - other.max(axis=1)


def reference(session: Session, model: Model) -> dict[str, Any] | None:
    """The training part's decision values and margins, recomputed from the stored dataset's
    training rows (the model's own split: its test_fraction and seed), cached with the loaded
    model; None when the dataset is gone or no longer the model's."""
    loaded = acquire(runtime_of(session), Target(model.id), 0.0, None, session=session).model
    cached = loaded.extras.get("monitoring_reference")
    if cached is not None:
        return cached
    dataset = datasets.get(session, model.dataset_id) if model.dataset_id else None
    if dataset is None or not feature_match(dataset, model):
        return None
    X, y = datasets.load_arrays(session, dataset)
    X = dataset_features(X, dataset, model)  # without the model's weight column
    session.commit()  # read-only: end the transaction before computing
    params = model.params or {}
    train_idx, _ = split_indices(y, params.get("test_fraction"), params.get("seed"))
    est = loaded.estimator
    Xs = loaded.transform(X[train_idx])
    scores = np.asarray(est.decision_function(Xs), dtype=np.float64)
    classes = est.classes_
    true = models.match_labels(classes, y[train_idx].tolist(), ["dataset"])
    if scores.ndim == 1:
        decision = scores
    else:
        decision = scores[np.arange(len(true)), est.predicted_index(scores)]
    theta = float(np.mean(margins_of(scores, true)))
    skipped = feature_drift.skip_reason(len(model.feature_names), loaded.scaling is not None)
    counts = None if skipped else feature_drift.bin_counts(Xs)
    cached = loaded.extras["monitoring_reference"] = {
        "decision": decision, "theta": theta, "feature_counts": counts, "feature_skip": skipped,
        **_atc_reference(loaded, X, y, params, (scores, true), Xs),
    }  # fmt: skip
    return cached


def _atc_reference(loaded: Any, X: Any, y: np.ndarray, params: dict[str, Any],
                   train: tuple[np.ndarray, np.ndarray], train_X: Any) -> dict[str, Any]:
    """ATC's threshold (``reliability.atc_threshold``), the class shares the label-shift
    estimate starts from (``label_priors``: ``label_shift.estimate``) and the domain
    classifier's reference rows (``domain.reference_rows``: scaled, with whether the model
    got them right) on the
    model's hold-out rows when it kept at least ``ATC_MIN_REFERENCE`` of them, else on its
    training part (``train``'s decision values and true class indices, ``train_X`` its scaled
    rows); none without calibrated probabilities."""
    est = loaded.estimator
    if not est.calibrated:
        return {"atc_threshold": None, "atc_reference": None, "domain": None,
                "label_priors": None}
    _, test_idx = split_indices(y, params.get("test_fraction"), params.get("seed"))
    scores, true, Xs, source = train[0], train[1], train_X, "training"
    if len(test_idx) >= reliability.ATC_MIN_REFERENCE:
        Xs = loaded.transform(X[test_idx])
        scores = np.asarray(est.decision_function(Xs), dtype=np.float64)
        true = models.match_labels(est.classes_, y[test_idx].tolist(), ["dataset"])
        source = "hold-out"
    proba = est.probabilities(scores)
    predicted = est.predicted_index(scores, proba)
    confidence = proba[np.arange(len(predicted)), predicted]
    dense = None if sp.issparse(Xs) or loaded.scaling is None else Xs
    return {"atc_threshold": reliability.atc_threshold(confidence, predicted == true),
            "atc_reference": source,
            "label_priors": np.bincount(true, minlength=proba.shape[1]) / max(len(true), 1),
            "domain": None if dense is None else domain.reference_rows(dense, predicted == true,
                                                                         confidence)}


def _margin_part(cols: window.Columns, rows: np.ndarray, multiclass: bool) -> dict[str, Any]:
    """n, accuracy and margin statistics of the rows ``rows`` (indices into ``cols``)."""
    true = cols.true_class[rows]
    decisions = cols.decisions[rows] if multiclass else cols.decision[rows]
    stats = margin_statistics(margins_of(decisions, true))
    predicted = cols.predicted[rows]
    return {
        "n": int(rows.size),
        "accuracy": float(np.mean(predicted == true)),
        "mean": stats["mean"],
        "semivariance": stats["semivariance"],
        "sv_ratio": stats["sv_ratio"],
    }


#: The report's buckets of labelled rows: how many characters of a row's UTC minute
#: (``YYYY-MM-DDTHH:MM``, ``window.Columns.minutes``) name its bucket, and the rest of the
#: bucket's start time.
BUCKETS = {"minute": (16, ":00Z"), "hour": (13, ":00:00Z"), "day": (10, "T00:00:00Z")}


def _bucketed(cols: window.Columns, done: np.ndarray, multiclass: bool,
              bucket: str) -> list[dict[str, Any]]:
    """n, accuracy and θ̂ of the labelled rows ``done`` per UTC ``bucket``, oldest first; each
    named by its start (``start``, ISO 8601 UTC)."""
    width, rest = BUCKETS[bucket]
    keys = cols.minutes.astype(f"<U{width}")  # (numpy truncates the text)
    out = []
    for key in np.unique(keys):  # (sorted)
        part = _margin_part(cols, done[keys == key], multiclass)
        out.append({"start": str(key) + rest, "n": part["n"], "accuracy": part["accuracy"],
                    "mean": part["mean"]})  # fmt: skip
    return out


def labelled(cols: window.Columns, multiclass: bool, bucket: str = "day") -> dict[str, Any]:
    """Rows with feedback: n, accuracy and margin_statistics' mean (θ̂), semivariance,
    sv_ratio of their margins; ``daily``, n, accuracy and θ̂ per UTC day the rows were
    predicted (oldest first), and the same per ``bucket`` (minute, hour or day: ``buckets``).
    Multi-class ``cols`` carry their ``decisions``."""
    done = np.flatnonzero(cols.labelled)
    if done.size == 0:
        return {"n": 0, "accuracy": None, "mean": None, "semivariance": None, "sv_ratio": None,
                "daily": [], "bucket": bucket, "buckets": []}  # fmt: skip
    daily = [{"day": b["start"][:10], "n": b["n"], "accuracy": b["accuracy"],
              "mean": b["mean"]} for b in _bucketed(cols, done, multiclass, "day")]  # fmt: skip
    return _margin_part(cols, done, multiclass) | {
        "daily": daily, "bucket": bucket, "buckets": _bucketed(cols, done, multiclass, bucket)}


def _domain_part(out: dict[str, Any], ref: dict[str, Any] | None,
                 sample: tuple[np.ndarray, int] | None, names: list[str]) -> None:
    """The domain classifier between the reference rows and the window's sample
    (``domain.compare``, timed), its importance-weighted estimate and the ``interval``
    for the realised accuracy: ``low``, ``high`` widened by the calibration's weighted error
    on the reference rows (z √(sd² + gap² + se²)), into ``out``."""
    out["domain_classifier"] = out["importance_weighted"] = out["interval"] = None
    if ref is None or ref.get("domain") is None or sample is None:
        return
    started = time.perf_counter()
    found = domain.compare(ref["domain"], sample[0], out["n"], names)
    if found is None:
        return
    out["importance_weighted"] = weighted = found.pop("importance_weighted")
    out["domain_classifier"] = found | {"n_sampled": sample[1],
                                        "seconds": time.perf_counter() - started}
    # low, high widened by the calibration's error where the window's rows are
    z = float(stats.norm.ppf(1.0 - out["alpha"] / 2.0))
    half = z * np.sqrt(out["sd"] ** 2 + weighted["calibration_gap"] ** 2
                       + weighted["calibration_se"] ** 2)
    out["interval"] = {"low": max(0.0, out["estimate"] - half),
                       "high": min(1.0, out["estimate"] + half),
                       "calibration_gap": weighted["calibration_gap"],
                       "calibration_se": weighted["calibration_se"]}


def performance_estimate(estimator: Any, cols: window.Columns, multiclass: bool,
                         ref: dict[str, Any] | None = None,
                         sample: tuple[np.ndarray, int] | None = None,
                         names: list[str] | None = None) -> dict[str, Any] | None:
    """The window's accuracy expected from the model's calibrated probabilities of its logged
    decision values (``solver.performance_estimate``: mean confidence of the predicted class,
    95 % interval), beside the realised accuracy of its rows with feedback (None without)
    and their ``gap``; with the model's reference (``ref``), the ATC estimate beside it;
    with the window's sampled rows (``sample``: rows, how many sampled), the domain
    classifier and its importance-weighted estimate (``_domain_part``); the ``reliability``
    verdict (``app.monitoring.reliability``). None when the model has no calibrator or the
    window no rows."""
    if not estimator.calibrated:
        return None
    if multiclass:  # the full one-vs-rest vector, logged with each multi-class row
        keep = cols.has_decisions
        D = cols.decisions[keep]
    else:
        keep = np.ones(len(cols), dtype=bool)
        D = cols.decision
    if not keep.any():
        return None
    clipped = float(np.mean(cols.clipped)) if len(cols) else None
    predicted = cols.predicted[keep]
    true = cols.true_class[keep]
    proba = estimator.probabilities(D)
    estimate = expected_accuracy(proba, predicted)
    done = true != window.NO_CLASS
    realised = float(np.mean(predicted[done] == true[done])) if done.any() else None
    confidence_all = proba[np.arange(len(predicted)), predicted]
    sd = float(np.sqrt(np.sum(confidence_all * (1.0 - confidence_all)))) / max(len(predicted), 1)
    out = {"method": "cbpe", "alpha": 0.05, **estimate, "sd": sd, "realised_accuracy": realised,
           "n_labelled": int(done.sum())}  # fmt: skip
    out["gap"] = None if realised is None else realised - estimate["estimate"]
    if ref is not None:
        confidence = proba[np.arange(len(predicted)), predicted]
        out["atc"] = reliability.atc_estimate(confidence, ref.get("atc_threshold"),
                                              ref.get("atc_reference") or "training")
    _domain_part(out, ref, sample, names or [])
    priors = None if ref is None else ref.get("label_priors")
    out["label_shift"] = None if priors is None else label_shift.estimate(
        proba, predicted, priors)
    out["reliability"] = reliability.verdict(out, out.get("atc"), clipped)
    return out


def _drift(ref: np.ndarray | None, live: np.ndarray) -> dict[str, Any] | None:
    if ref is None or live.size == 0:
        return None
    result = ks_2samp(ref, live)
    return {
        "method": "ks_2samp",
        "statistic": float(result.statistic),
        "p_value": float(result.pvalue),
        "threshold": DRIFT_P_VALUE,
        "drifted": bool(result.pvalue < DRIFT_P_VALUE),
    }


def _per_feature(
    session: Session,
    model: Model,
    ref: dict[str, Any],
    since: datetime | None,
    until: datetime | None,
) -> dict[str, Any]:
    """``feature_drift.compare`` of the window's live counts, or why there is none."""
    names = [str(n) for n in model.feature_names]
    if ref["feature_skip"] is not None:
        return {"method": "ks_binned", "n_features": len(names), "drifted_count": None,
                "features": [], "skipped": ref["feature_skip"]}  # fmt: skip
    n_live, counts = feature_drift.live_counts(session, model.id, len(names), since, until)
    return feature_drift.compare(ref["feature_counts"], counts, n_live, names)


@dataclass
class Window:
    """What a report reads: the model, its reference (or None), the window's logged rows as
    numpy columns (``window.Columns``, with the decision vectors of a multi-class model) and
    their decision values, and the per-feature comparison (None without a reference)."""

    model: Model
    ref: dict[str, Any] | None
    cols: window.Columns
    live: np.ndarray
    per_feature: dict[str, Any] | None
    log: dict[str, Any] | None = None  # the log's state (PredictionLogWriter.state)
    sample: tuple[np.ndarray, int] | None = None  # the window's sampled rows (samples)


def read_window(
    session: Session,
    model_id: int,
    since: datetime | None,
    until: datetime | None,
    writer: prediction_log.PredictionLogWriter | None = None,
) -> Window:
    """The report's inputs over [since, until), after waiting a bounded time for this
    process's queued log rows and feature counts (``writer``; other processes' are written
    within their flush/write intervals)."""
    if since is not None and until is not None and since >= until:
        raise invalid(["query", "until"], "must be after since")
    # This process's queued rows and feature counts: waited for a bounded time, never for the
    # writer; the window says how many still wait.
    state = writer.state(counts=True) if writer is not None else None
    model = models.get_or_raise(session, model_id)
    ref = reference(session, model)
    multiclass = len(model.classes) > 2
    cols = window.read(session, model_id, since, until, MAX_REPORT_ROWS, multiclass)
    per_feature = _per_feature(session, model, ref, since, until) if ref is not None else None
    sample = None
    if ref is not None and ref.get("domain") is not None:
        sample = samples.window_rows(session, model_id, len(model.feature_names), since, until)
    session.commit()
    return Window(model, ref, cols, cols.decision, per_feature, state, sample)


def model_report(
    session: Session,
    model_id: int,
    since: datetime | None,
    until: datetime | None,
    writer: prediction_log.PredictionLogWriter | None = None,
    bucket: str = "day",
) -> dict[str, Any]:
    """The report of ``model_id`` over the window [since, until) (see the module's docstring
    and ``read_window``); the labelled rows also per ``bucket`` (``BUCKETS``)."""
    w = read_window(session, model_id, since, until, writer)
    theta = w.ref["theta"] if w.ref else None
    live_part = describe(w.live, theta)
    live_part["clipped_fraction"] = float(np.mean(w.cols.clipped)) if len(w.cols) else None
    ref_part = None
    if w.ref is not None:
        ref_part = describe(w.ref["decision"], theta) | {"theta": theta}
    drift = _drift(w.ref["decision"] if w.ref else None, w.live)
    if drift is not None:
        drift["per_feature"] = w.per_feature
    estimator = acquire(runtime_of(session), Target(model_id), 0.0, None,
                        session=session).model.estimator
    estimate = performance_estimate(estimator, w.cols, len(w.model.classes) > 2, w.ref,
                                    w.sample, [str(n) for n in w.model.feature_names])
    report = {
        "model_id": model_id,
        "since": since,
        "until": until,
        "reference": ref_part,
        "live": live_part,
        "performance_estimate": estimate,
        "drift": drift,
        "margin_density": reliability.margin_density(
            ref_part["inside_margin_fraction"] if ref_part else None,
            live_part["inside_margin_fraction"]),
        "labelled": labelled(w.cols, len(w.model.classes) > 2, bucket),
        "log": w.log,
    }
    report["warnings"] = reliability.warnings(report)
    return report


def model_figure(
    session: Session,
    model_id: int,
    since: datetime | None,
    until: datetime | None,
    writer: prediction_log.PredictionLogWriter | None = None,
) -> bytes:
    """The report's window as a PNG (``figure.render``)."""
    w = read_window(session, model_id, since, until, writer)
    daily = labelled(w.cols, len(w.model.classes) > 2)["daily"]
    return figure.render(
        reference=w.ref["decision"] if w.ref else None,
        live=w.live,
        theta=w.ref["theta"] if w.ref else None,
        daily=daily,
        title=f"model {model_id}: monitoring",
    )
