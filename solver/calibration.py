"""Probabilities from decision values: Platt's sigmoid or isotonic regression, fitted on
cross-validated decision values of the training rows, kept as plain JSON.

The reference is scikit-learn's ``CalibratedClassifierCV(estimator, method=...,
ensemble=False, cv=folds)``: the decision values of each training row come from a clone fitted
on the other folds (``cross_validated_decisions``), one calibrator is fitted per class on them
(binary: one, for ``classes_[1]``), and the final estimator is the one fitted on every row.
Multi-class: each class's one-vs-rest probability, then normalised to sum 1 (uniform where
every class got 0), as scikit-learn does.

* ``"sigmoid"`` (Platt 1999): P(c | f) = 1 / (1 + exp(a f + b)), (a, b) minimising the log loss
  against Platt's smoothed targets (N+ + 1) / (N+ + 2) and 1 / (N- + 2), solved to machine
  precision by scipy's exact-Hessian trust region (two parameters, a convex problem).
* ``"isotonic"``: scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``; its thresholds are
  kept and applied by linear interpolation, which is what its ``predict`` does.

Labels: a calibrated model's label is its most probable class (``most_probable``), as
``CalibratedClassifierCV.predict`` is the argmax of its ``predict_proba``; the probabilities
and the label a client is given then never contradict each other. (Platt's P = 1/2 is at
f = -b/a, not at the decision's 0: on NASA's kc1, 1.6 % of the rows change label.)

Folds: ``StratifiedKFold(n_splits=min(cv, smallest class count), shuffle=True,
random_state=seed)``; the estimators use their own ``random_state`` as the seed (0 when None).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, sparse, special
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.utils import get_tags

CALIBRATIONS = ("none", "sigmoid", "isotonic")
# Folds of the cross-validated decision values (scikit-learn's default cv=5).
CALIBRATION_FOLDS = 5
CALIBRATOR_FORMAT = "msvmav.calibrator"


class Calibrator:
    """Maps decision values to class probabilities.

    ``method``: "sigmoid" or "isotonic"; ``classes_``: (k,) labels; ``params``: one dict per
    fitted one-vs-rest map (one for two classes, for classes_[1]; k otherwise):
    sigmoid {"a", "b"}, isotonic {"x", "y"} (thresholds, increasing x)."""

    def __init__(self, method: str, classes: np.ndarray, params: list[dict]) -> None:
        if method not in ("sigmoid", "isotonic"):
            raise ValueError(f"calibration: unknown method {method!r}; use 'sigmoid' or "
                             "'isotonic'")
        self.method = method
        self.classes_ = np.asarray(classes)
        self.params = params

    def _column(self, j: int, f: np.ndarray) -> np.ndarray:
        p = self.params[j]
        if self.method == "sigmoid":
            return special.expit(-(p["a"] * f + p["b"]))
        return np.interp(f, p["x"], p["y"])  # clipped to the end values outside the range

    def predict_proba(self, decision: np.ndarray) -> np.ndarray:
        """(n, k) probabilities from decision values: (n,) for two classes, (n, k) one-vs-rest
        scores otherwise. Binary: column 1 is P(classes_[1])."""
        D = np.asarray(decision, dtype=np.float64)
        k = self.classes_.size
        if k == 2:
            if D.ndim != 1:
                raise ValueError(f"decision: expected shape (n,) for two classes, got {D.shape}")
            p1 = np.clip(self._column(0, D), 0.0, 1.0)
            return np.column_stack([1.0 - p1, p1])
        if D.ndim != 2 or D.shape[1] != k:
            raise ValueError(f"decision: expected shape (n, {k}), got {D.shape}")
        P = np.column_stack([self._column(j, D[:, j]) for j in range(k)])
        total = P.sum(axis=1, keepdims=True)
        P = np.divide(P, total, out=np.full_like(P, 1.0 / k), where=total > 0)
        return np.clip(P, 0.0, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: {"format", "method", "classes", "params"} (classes as JSON scalars)."""
        return {"format": CALIBRATOR_FORMAT, "method": self.method,
                "classes": self.classes_.tolist(),
                "params": [{key: (value.tolist() if isinstance(value, np.ndarray) else value)
                            for key, value in p.items()} for p in self.params]}

    @classmethod
    def from_dict(cls, data: Any) -> Calibrator:
        """The calibrator ``to_dict`` wrote; ValueError (naming what is wrong) for anything
        else, as stored or uploaded models are checked before use."""
        if not isinstance(data, dict) or data.get("format") != CALIBRATOR_FORMAT:
            raise ValueError("calibrator: not a calibrator of this format")
        method, classes, raw = data.get("method"), data.get("classes"), data.get("params")
        if method not in ("sigmoid", "isotonic"):
            raise ValueError(f"calibrator: unknown method {method!r}")
        if not isinstance(classes, list) or len(classes) < 2 or not isinstance(raw, list):
            raise ValueError("calibrator: classes must be a list of at least 2 labels and "
                             "params a list")
        if len(raw) != (1 if len(classes) == 2 else len(classes)):
            raise ValueError(f"calibrator: {len(raw)} maps for {len(classes)} classes")
        try:
            params = [_checked_map(method, p) for p in raw]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"calibrator: malformed {method} parameters ({exc})") from None
        return cls(method, np.asarray(classes), params)


def most_probable(proba: np.ndarray) -> np.ndarray:
    """(n,) indices of each row's most probable class in proba (n, k), the first on a tie
    (binary: P(classes_[1]) = 1/2 exactly predicts classes_[0]), as ``np.argmax`` and so
    ``CalibratedClassifierCV.predict`` pick it."""
    return np.argmax(np.asarray(proba), axis=1)


def _checked_map(method: str, p: dict) -> dict:
    """One stored map with finite numbers: sigmoid {"a", "b"}; isotonic {"x", "y"} of equal
    length >= 1, x non-decreasing."""
    if method == "sigmoid":
        a, b = float(p["a"]), float(p["b"])
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError("a and b must be finite")
        return {"a": a, "b": b}
    x, y = np.asarray(p["x"], dtype=np.float64), np.asarray(p["y"], dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError("x and y must be lists of equal length")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(np.diff(x) >= 0)):
        raise ValueError("x must be finite and non-decreasing, y finite")
    return {"x": x, "y": y}


def platt_sigmoid(f: np.ndarray, positive: np.ndarray,
                  weight: np.ndarray | None = None) -> dict[str, float]:
    """Platt's (a, b): P(positive | f) = 1 / (1 + exp(a f + b)), fitted to the smoothed targets.

    f: (n,) decision values; positive: (n,) bool; weight: (n,) the rows' weights in the log
    loss (scikit-learn's ``_sigmoid_calibration``: the targets' counts stay unweighted), None
    for none."""
    f = np.asarray(f, dtype=np.float64)
    n_pos = float(np.count_nonzero(positive))
    n_neg = float(positive.size - n_pos)
    t = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    # scale f so the problem is well conditioned; (a, b) are mapped back below
    scale = float(np.max(np.abs(f))) if f.size else 1.0
    scale = scale if scale > 0 else 1.0
    g = f / scale

    def loss(ab: np.ndarray) -> float:
        z = ab[0] * g + ab[1]  # P = expit(-z); loss = sum log(1 + e^z) - (1 - t) z
        terms = np.logaddexp(0.0, z) - (1.0 - t) * z
        return float(np.sum(terms if weight is None else weight * terms))

    def grad(ab: np.ndarray) -> np.ndarray:
        r = special.expit(ab[0] * g + ab[1]) - (1.0 - t)
        r = r if weight is None else weight * r
        return np.array([r @ g, r.sum()])

    def hess(ab: np.ndarray) -> np.ndarray:
        s = special.expit(ab[0] * g + ab[1])
        w = s * (1.0 - s)
        w = w if weight is None else weight * w
        return np.array([[w @ (g * g), w @ g], [w @ g, w.sum()]])

    prior = np.log((n_neg + 1.0) / (n_pos + 1.0))
    result = optimize.minimize(loss, np.array([0.0, prior]), jac=grad, hess=hess,
                               method="trust-exact", options={"gtol": 1e-10})
    a, b = result.x
    return {"a": float(a / scale), "b": float(b)}


def isotonic_map(f: np.ndarray, positive: np.ndarray,
                 weight: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """scikit-learn's IsotonicRegression(out_of_bounds="clip") of the 0/1 target on f (rows
    weighted by ``weight``, None for none), as its thresholds (x increasing, y)."""
    iso = IsotonicRegression(out_of_bounds="clip").fit(f, positive.astype(np.float64),
                                                       sample_weight=weight)
    return {"x": np.asarray(iso.X_thresholds_, dtype=np.float64),
            "y": np.asarray(iso.y_thresholds_, dtype=np.float64)}


def fit_calibrator(decision: np.ndarray, y: np.ndarray, classes: np.ndarray,
                   method: str, sample_weight: np.ndarray | None = None) -> Calibrator:
    """A Calibrator fitted on decision values (already cross-validated) and labels y (n,)
    from ``classes`` (k,); decision (n,) for two classes, (n, k) otherwise; the rows weighted
    by ``sample_weight`` (n,) (None: unweighted)."""
    if method not in ("sigmoid", "isotonic"):
        raise ValueError(f"calibration: unknown method {method!r}; use 'sigmoid' or 'isotonic'")
    D = np.asarray(decision, dtype=np.float64)
    y = np.asarray(y)
    classes = np.asarray(classes)
    fit_one = platt_sigmoid if method == "sigmoid" else isotonic_map
    if classes.size == 2:
        params = [fit_one(D.reshape(-1), y == classes[1], sample_weight)]
    else:
        params = [fit_one(D[:, j], y == c, sample_weight) for j, c in enumerate(classes)]
    return Calibrator(method, classes, params)


def calibration_folds(y: np.ndarray, cv: int = CALIBRATION_FOLDS,
                      random_state: int | None = 0) -> StratifiedKFold:
    """The stratified, shuffled folds of the cross-validated decision values: ``cv`` of them,
    fewer when the smallest class has fewer rows (at least 2 rows per class needed)."""
    _, counts = np.unique(np.asarray(y), return_counts=True)
    smallest = int(counts.min())
    if smallest < 2:
        raise ValueError("calibration: needs at least 2 training rows of every class to "
                         "cross-validate its decision values; use calibration='none'")
    return StratifiedKFold(n_splits=min(cv, smallest), shuffle=True,
                           random_state=0 if random_state is None else random_state)


def _rows(X, idx: np.ndarray, cols: np.ndarray | None):
    """X[idx] (and [:, cols] for a precomputed kernel's training columns)."""
    part = X[idx]
    if cols is not None:
        part = part[:, cols]
    return part


def cross_validated_decisions(estimator: Any, X, y, cv: int = CALIBRATION_FOLDS,
                              random_state: int | None = 0, callback=None,
                              sample_weight=None, prepare=None) -> np.ndarray:
    """Out-of-fold decision values of the training rows: for each fold of ``calibration_folds``,
    a clone of ``estimator`` (with calibration="none") fitted on the other folds scores it.
    Shape (n,) for two classes, (n, k) otherwise. A precomputed kernel's columns are cut to the
    clone's training rows. ``callback`` is passed to each clone's fit; None is returned when it
    stopped one. ``sample_weight`` (n,): each clone fits its rows' weights (None: none).
    ``prepare(clone, train)``, where given, is called before each clone's fit (an update's
    warm-started folds: ``MSVMAv.update_fit(warm_folds=True)``)."""
    y = np.asarray(y)
    classes = np.unique(y)
    pairwise = get_tags(estimator).input_tags.pairwise
    if sparse.issparse(X):
        X = X.tocsr()
    out = np.zeros((y.size,) if classes.size == 2 else (y.size, classes.size))
    for train, test in calibration_folds(y, cv, random_state).split(np.zeros(y.size), y):
        est = clone(estimator).set_params(calibration="none")
        weights = {} if sample_weight is None else {
            "sample_weight": np.broadcast_to(np.asarray(sample_weight, dtype=np.float64),
                                             (y.size,))[train]}
        if prepare is not None:
            prepare(est, train)
        est.fit(_rows(X, train, train if pairwise else None), y[train], callback=callback,
                **weights)
        if getattr(est, "stopped_early_", False):
            return None
        out[test] = est.decision_function(_rows(X, test, train if pairwise else None))
    return out


__all__ = ["CALIBRATIONS", "CALIBRATION_FOLDS", "Calibrator", "calibration_folds",
           "cross_validated_decisions", "fit_calibrator", "isotonic_map", "most_probable",
           "platt_sigmoid"]
