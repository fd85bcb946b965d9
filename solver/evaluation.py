"""How good a classifier's predictions are, as JSON-able numbers and curves, each computed by
``sklearn.metrics`` (or ``sklearn.calibration.calibration_curve``) except the expected
calibration error, which scikit-learn does not define (see ``expected_calibration_error``).

Conventions:
* ranking metrics (ROC AUC, PR AUC = average precision, the ROC and PR curves) use the
  decision values, the order the model ranks by (an isotonic calibrator's ties would lose
  resolution); one-vs-rest per class for more than two classes, macro = their unweighted mean;
  a class without positives (or negatives) in ``y_true`` has no AUC (None);
* probability metrics (log loss, Brier score, ECE, reliability) need ``proba``; None without;
* rows whose true label is not among ``classes`` count as errors in accuracy and the
  confusion matrix (an extra label) and are left out of the ranking and probability metrics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn import metrics
from sklearn.calibration import calibration_curve

# Equal-width probability bins of the ECE and the reliability curves.
N_BINS = 10


def _py(value: Any) -> Any:
    """A numpy scalar as the Python value JSON takes."""
    return value.item() if isinstance(value, np.generic) else value


def expected_calibration_error(y_true_index: np.ndarray, proba: np.ndarray,
                               n_bins: int = N_BINS) -> float:
    """Top-label ECE: rows binned by the probability of their predicted class in ``n_bins``
    equal-width bins of [0, 1] (scikit-learn's ``calibration_curve`` binning), then
    sum_b (n_b / n) |accuracy_b - mean confidence_b|. y_true_index: (n,) indices into the
    probability columns; proba: (n, k)."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.shape[0] == 0:
        return 0.0
    predicted = np.argmax(proba, axis=1)
    confidence = proba[np.arange(proba.shape[0]), predicted]
    correct = (predicted == np.asarray(y_true_index)).astype(np.float64)
    bins = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], confidence)
    gap = np.abs(np.bincount(bins, correct, n_bins) - np.bincount(bins, confidence, n_bins))
    return float(gap.sum() / proba.shape[0])


def _ranking(y: np.ndarray, D: np.ndarray, classes: np.ndarray, score) -> Any:
    """score(y == c, decision for c): binary a float, else {"macro", "per_class"}."""
    def one(positive: np.ndarray, d: np.ndarray) -> float | None:
        if positive.all() or not positive.any():
            return None
        return float(score(positive, d))

    if classes.size == 2:
        return one(y == classes[1], D)
    per = {str(_py(c)): one(y == c, D[:, j]) for j, c in enumerate(classes)}
    defined = [v for v in per.values() if v is not None]
    return {"macro": float(np.mean(defined)) if defined else None, "per_class": per}


def _probability_metrics(y: np.ndarray, proba: np.ndarray | None,
                         classes: np.ndarray) -> dict[str, float | None]:
    if proba is None or y.size == 0:
        return {"log_loss": None, "brier": None, "ece": None}
    idx = np.searchsorted(classes, y)
    return {"log_loss": float(metrics.log_loss(y, proba, labels=classes)),
            "brier": float(metrics.brier_score_loss(y, proba, labels=classes)),
            "ece": expected_calibration_error(idx, proba)}


def evaluate(y_true, y_pred, decision, proba, classes, *,
             majority_class: Any = None) -> dict[str, Any]:
    """Metrics of predictions y_pred (n,), decision values ((n,) for two classes, (n, k)
    one-vs-rest) and probabilities proba ((n, k) or None) against y_true (n,), for a model
    with ``classes`` (k,) sorted. ``majority_class``: the baseline's constant prediction
    (default the most frequent label of y_true). Keys: see the module doc and
    ``docs/solver.md``."""
    y, pred = np.asarray(y_true), np.asarray(y_pred)
    classes = np.asarray(classes)
    D = np.asarray(decision, dtype=np.float64)
    P = None if proba is None else np.asarray(proba, dtype=np.float64)
    if majority_class is None:
        values, counts = np.unique(y, return_counts=True)
        majority_class = values[np.argmax(counts)]
    baseline = float(metrics.accuracy_score(y, np.full(y.shape, majority_class)))
    known = np.isin(y, classes)
    labels = np.concatenate([classes, np.setdiff1d(np.unique(y), classes)])
    accuracy = float(metrics.accuracy_score(y, pred))
    precision, recall, f1, support = metrics.precision_recall_fscore_support(
        y, pred, labels=labels, zero_division=0)
    yk, Dk = y[known], D[known]
    return {
        "n": int(y.size),
        "accuracy": accuracy,
        "balanced_accuracy": float(metrics.balanced_accuracy_score(y, pred)),
        "majority_baseline": baseline,
        "majority_class": _py(majority_class),
        "beats_baseline": bool(accuracy > baseline),
        "roc_auc": _ranking(yk, Dk, classes, metrics.roc_auc_score),
        "pr_auc": _ranking(yk, Dk, classes, metrics.average_precision_score),
        **_probability_metrics(yk, None if P is None else P[known], classes),
        "confusion_matrix": {
            "labels": [_py(c) for c in labels],
            "matrix": metrics.confusion_matrix(y, pred, labels=labels).tolist()},
        "per_class": [{"label": _py(c), "precision": float(p), "recall": float(r),
                       "f1": float(f), "support": int(s)}
                      for c, p, r, f, s in zip(labels, precision, recall, f1, support,
                                               strict=True)],
    }


def _finite(values: np.ndarray) -> list[float | None]:
    """A curve's values as JSON numbers (roc_curve's first threshold is +inf: None)."""
    return [float(v) if np.isfinite(v) else None for v in values]


def _reliability(positive: np.ndarray, p: np.ndarray, label: Any) -> dict[str, Any]:
    fraction, mean_predicted = calibration_curve(positive, p, n_bins=N_BINS,
                                                 strategy="uniform")
    bins = np.searchsorted(np.linspace(0.0, 1.0, N_BINS + 1)[1:-1], p)
    count = np.bincount(bins, minlength=N_BINS)
    return {"label": _py(label), "mean_predicted": _finite(mean_predicted),
            "fraction_positive": _finite(fraction), "count": count[count > 0].tolist()}


def curves(y_true, decision, proba, classes) -> dict[str, list[dict[str, Any]]]:
    """ROC and precision-recall curves (from decision values) and reliability curves (from
    probabilities; empty without them), one per class one-vs-rest, only classes_[1] for two
    classes; classes without positives or negatives in y_true are left out. Reliability: the
    non-empty bins of 10 equal-width ones, with their row counts."""
    y, classes = np.asarray(y_true), np.asarray(classes)
    D = np.asarray(decision, dtype=np.float64)
    known = np.isin(y, classes)
    y, D = y[known], D[known]
    P = None if proba is None else np.asarray(proba, dtype=np.float64)[known]
    columns = [(1, classes[1])] if classes.size == 2 else list(enumerate(classes))
    out: dict[str, list[dict[str, Any]]] = {"roc": [], "pr": [], "reliability": []}
    for j, label in columns:
        positive = y == label
        if positive.all() or not positive.any():
            continue
        d = D if classes.size == 2 else D[:, j]
        fpr, tpr, thresholds = metrics.roc_curve(positive, d)
        out["roc"].append({"label": _py(label), "fpr": _finite(fpr), "tpr": _finite(tpr),
                           "thresholds": _finite(thresholds)})
        precision, recall, _ = metrics.precision_recall_curve(positive, d)
        out["pr"].append({"label": _py(label), "precision": _finite(precision),
                          "recall": _finite(recall)})
        if P is not None:
            out["reliability"].append(_reliability(positive, P[:, j], label))
    return out


__all__ = ["N_BINS", "curves", "evaluate", "expected_calibration_error"]
