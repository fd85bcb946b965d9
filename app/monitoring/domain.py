"""A domain classifier between the model's reference rows and a window's sampled rows (issue
47): how well the two can be told apart, and an importance-weighted accuracy estimate from it.

The reference is the model's own labelled rows as the model saw them (scaled to [0, 1] and
clipped, as the logged rows are): its hold-out when it kept at least ``ATC_MIN_REFERENCE``
rows (else its training part), at most ``REFERENCE_ROWS`` of them (a seeded subsample), each
with whether the model predicted it right. The window's rows are its sample
(``app.monitoring.samples``), at most ``samples.READ_ROWS``. Each side is fitted on at most
``CELLS`` values (rows × features; a seeded subsample), with one BLAS thread.

* **Domain AUC**: scikit-learn's ``LogisticRegression`` (C ``C``, balanced classes) tells
  reference (0) from window (1); ``cross_val_predict`` over ``FOLDS`` stratified, seeded
  folds gives each row a probability from a fit that did not see it, and the ROC AUC of those
  is the statistic: 0.5 when the window looks like the reference, 1 when the two do not
  overlap. ``top_features`` are the features with the largest |coefficient| of a fit on all
  rows (the scaled features share one range, so coefficients compare).
* **Importance-weighted accuracy** (density-ratio weighting, Sugiyama et al. 2007): each
  reference row's out-of-fold odds p / (1 − p) (p clipped to [``P_CLIP``, 1 − ``P_CLIP``])
  estimates how much more often a row like it occurs in the window than in the reference; the
  window's accuracy is the weighted mean of the reference rows' correctness. Its 95 % interval
  adds two variances: the weighted mean's (Σ w²(c − â)² / (Σ w)²) and the window's own
  binomial spread â(1 − â)/n over its n rows. ``n_effective`` = (Σ w)² / Σ w² says how many
  reference rows the estimate really rests on. It assumes the window's rows lie where the
  reference has rows (support overlap) and that P(y | x) did not move.
* **The calibration where the window is**: the same weights give the calibration's error in
  the window's region, ``calibration_gap`` = Σ w (confidence − correct) / Σ w over the
  reference rows, and its standard error ``calibration_se``
  (√(Σ w² (g − ḡ)²) / Σ w); the report widens the confidence-based interval by them.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy import stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from threadpoolctl import threadpool_limits

REFERENCE_ROWS = 2_000
CELLS = 250_000  # values (rows x features) of each side a comparison fits on at most
MIN_ROWS = 50  # window rows (and reference rows) a comparison needs at least
FOLDS = 5
C = 1.0
P_CLIP = 0.01
SEED = 0
TOP_FEATURES = 3


def reference_rows(X: np.ndarray, correct: np.ndarray,
                   confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At most ``REFERENCE_ROWS`` of the reference (a seeded subsample), clipped to [0, 1],
    with whether each was predicted right and its predicted-class probability."""
    X = np.clip(np.nan_to_num(np.asarray(X, dtype=np.float64)), 0.0, 1.0)
    correct, confidence = np.asarray(correct, dtype=bool), np.asarray(confidence, dtype=float)
    if X.shape[0] > REFERENCE_ROWS:
        keep = np.sort(np.random.default_rng(SEED).choice(X.shape[0], REFERENCE_ROWS,
                                                          replace=False))
        X, correct, confidence = X[keep], correct[keep], confidence[keep]
    return X, correct, confidence


def _bounded(X: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """At most ``CELLS`` values of X's rows (a seeded subsample), with their ``columns``."""
    rows = max(MIN_ROWS, CELLS // max(X.shape[1], 1))
    if X.shape[0] <= rows:
        return [X, *columns]
    keep = np.sort(np.random.default_rng(SEED).choice(X.shape[0], rows, replace=False))
    return [X[keep], *(c[keep] for c in columns)]


def _classifier() -> LogisticRegression:
    return LogisticRegression(C=C, class_weight="balanced", max_iter=500)


def _weighted(p_ref: np.ndarray, correct: np.ndarray, confidence: np.ndarray, n_window: int,
              alpha: float) -> dict[str, Any]:
    p = np.clip(p_ref, P_CLIP, 1.0 - P_CLIP)
    w = p / (1.0 - p)
    estimate = float(np.sum(w * correct) / np.sum(w))
    var = float(np.sum(w**2 * (correct - estimate) ** 2) / np.sum(w) ** 2)
    gap = confidence - correct  # the calibration's error on each reference row
    gap_mean = float(np.sum(w * gap) / np.sum(w))
    gap_se = float(np.sqrt(np.sum(w**2 * (gap - gap_mean) ** 2)) / np.sum(w))
    var += estimate * (1.0 - estimate) / max(n_window, 1)
    half = float(stats.norm.ppf(1.0 - alpha / 2.0)) * np.sqrt(var)
    return {"method": "importance_weighted", "estimate": estimate,
            "low": max(0.0, estimate - half), "high": min(1.0, estimate + half),
            "n_effective": float(np.sum(w) ** 2 / np.sum(w**2)), "n_reference": int(p.size),
            "calibration_gap": gap_mean, "calibration_se": gap_se}


def compare(reference: tuple[np.ndarray, np.ndarray, np.ndarray], window_X: np.ndarray,
            n_window: int, names: list[str], alpha: float = 0.05) -> dict[str, Any] | None:
    """The domain classifier's ``auc``, ``top_features`` and the ``importance_weighted``
    estimate (module docstring) of a window of ``n_window`` rows sampled as ``window_X``,
    against the ``reference`` rows (``reference_rows``); None with fewer than ``MIN_ROWS``
    rows on either side."""
    ref_X, correct, confidence = _bounded(*reference)
    (window_X,) = _bounded(window_X)
    n_ref, n_win = ref_X.shape[0], window_X.shape[0]
    if n_ref < MIN_ROWS or n_win < MIN_ROWS:
        return None
    X = np.vstack([ref_X, window_X])
    y = np.r_[np.zeros(n_ref, dtype=int), np.ones(n_win, dtype=int)]
    folds = StratifiedKFold(FOLDS, shuffle=True, random_state=SEED)
    # one BLAS thread: on a busy machine a threaded fit took 40 times as long
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        p = cross_val_predict(_classifier(), X, y, cv=folds, method="predict_proba")[:, 1]
        coef = np.abs(_classifier().fit(X, y).coef_[0])
    top = np.argsort(-coef, kind="stable")[:TOP_FEATURES]
    return {"method": "logistic_regression", "auc": float(roc_auc_score(y, p)),
            "folds": FOLDS, "n_reference": n_ref, "n_window": n_win,
            "top_features": [str(names[j]) for j in top],
            "importance_weighted": _weighted(p[:n_ref], correct, confidence, n_window, alpha)}
