"""Decision rules: class probabilities in, label indices out, and the fitting of a rule's
threshold on probabilities with known labels (out-of-fold ones, never the hold-out's).

A rule is a small JSON-able dict (``check_rule`` validates one):

* ``{"kind": "argmax"}``: the most probable class (``solver.calibration.most_probable``), the
  default of a calibrated model, as ``CalibratedClassifierCV.predict``;
* ``{"kind": "threshold", "class_index": c, "threshold": t}``: class c when P_c >= t, else
  the most probable of the other classes. For two classes with c = 1 this is scikit-learn's
  ``FixedThresholdClassifier(threshold=t, response_method="predict_proba")``
  (``y_score >= threshold`` predicts the positive label);
* ``{"kind": "cost", "matrix": C}``: the Bayes rule under the cost matrix C (k, k), C[i][j]
  the cost of predicting class j when the true class is i: argmin_j sum_i P_i C[i, j] (the
  first on a tie).

An objective (``check_objective``) says what to fit: ``{"cost_fp": a, "cost_fn": b}``
(two classes; positive class ``positive``, by default index 1): the threshold on P(positive)
that minimises the empirical cost a FP + b FN over the given rows, as
``TunedThresholdClassifierCV`` with a cost scorer does over its folds' thresholds (here over
every distinct probability, so no grid); ``{"cost_matrix": C}``: the Bayes rule of C;
``{"target": "precision" | "recall" | "fpr", "value": v, "positive": c}``: the threshold on
P_c that meets the target on the given rows with the most positives found (precision >= v or
fpr <= v: the lowest such threshold; recall >= v: the highest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .calibration import most_probable

KINDS = ("argmax", "threshold", "cost")
TARGETS = ("precision", "recall", "fpr")
#: Largest number of classes a cost matrix may have (k x k numbers in a request).
MAX_COST_CLASSES = 100


class RuleError(ValueError):
    """A rule or objective that cannot be used; ``field`` names the offending key."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _finite_nonnegative(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(field, "must be a number")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise RuleError(field, f"must be a finite number >= 0, got {value!r}")
    return number


def _class_index(value: Any, n_classes: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n_classes:
        raise RuleError(field, f"must be a class index in [0, {n_classes - 1}], got {value!r}")
    return int(value)


def check_matrix(matrix: Any, n_classes: int, field: str = "cost_matrix") -> np.ndarray:
    """C as a (k, k) float64 array of finite costs >= 0 that is not all equal to zero on
    every row's off-diagonal; RuleError naming ``field`` (and the cell) otherwise."""
    if not isinstance(matrix, list) or len(matrix) != n_classes:
        raise RuleError(field, f"must be a list of {n_classes} rows (one per true class)")
    rows = []
    for i, row in enumerate(matrix):
        if not isinstance(row, list) or len(row) != n_classes:
            raise RuleError(f"{field}[{i}]", f"must be a list of {n_classes} costs")
        rows.append([_finite_nonnegative(v, f"{field}[{i}][{j}]") for j, v in enumerate(row)])
    C = np.asarray(rows, dtype=np.float64)
    if not np.any(C > 0):
        raise RuleError(field, "every cost is 0: no decision is better than another")
    return C


def check_rule(rule: Any, n_classes: int) -> dict[str, Any]:
    """A valid rule for ``n_classes`` classes, normalised (floats, ints); RuleError naming the
    field otherwise."""
    if not isinstance(rule, dict) or rule.get("kind") not in KINDS:
        raise RuleError("kind", f"must be one of {list(KINDS)}")
    kind = rule["kind"]
    if kind == "argmax":
        return {"kind": "argmax"}
    if kind == "cost":
        return {"kind": "cost", "matrix": check_matrix(rule.get("matrix"), n_classes,
                                                       "matrix").tolist()}
    c = _class_index(rule.get("class_index"), n_classes, "class_index")
    t = _finite_nonnegative(rule.get("threshold"), "threshold")
    if t > 1:
        raise RuleError("threshold", f"must be a probability in [0, 1], got {t!r}")
    return {"kind": "threshold", "class_index": c, "threshold": t}


def apply_rule(rule: dict[str, Any], proba: np.ndarray) -> np.ndarray:
    """(n,) label indices of the rows of ``proba`` (n, k) under ``rule`` (see the module's
    docstring; the rule is assumed checked by ``check_rule``)."""
    P = np.asarray(proba, dtype=np.float64)
    kind = rule["kind"]
    if kind == "argmax":
        return most_probable(P)
    if kind == "cost":
        expected = P @ np.asarray(rule["matrix"], dtype=np.float64)  # (n, k): sum_i P_i C[i, j]
        return np.argmin(expected, axis=1)
    c, t = rule["class_index"], rule["threshold"]
    others = P.copy()
    others[:, c] = -np.inf
    return np.where(P[:, c] >= t, c, np.argmax(others, axis=1))


# -- objectives -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Objective:
    """A checked objective: ``kind`` "cost" (binary costs or a matrix: ``matrix``) or a
    ``target`` ("precision", "recall", "fpr") with ``value`` for class ``positive``."""

    kind: str
    matrix: np.ndarray | None = None
    target: str | None = None
    value: float | None = None
    positive: int = 1
    binary_costs: bool = False

    def as_dict(self) -> dict[str, Any]:
        if self.kind == "cost" and self.binary_costs:
            assert self.matrix is not None
            neg = 1 - self.positive
            return {"cost_fp": float(self.matrix[neg, self.positive]),
                    "cost_fn": float(self.matrix[self.positive, neg]),
                    "positive": self.positive}
        if self.kind == "cost":
            assert self.matrix is not None
            return {"cost_matrix": self.matrix.tolist()}
        return {"target": self.target, "value": self.value, "positive": self.positive}


def check_objective(objective: Any, n_classes: int) -> Objective:
    """The objective as an ``Objective``; RuleError naming the field otherwise (exactly one of
    the cost_fp/cost_fn pair, ``cost_matrix`` and ``target``)."""
    if not isinstance(objective, dict):
        raise RuleError("objective", "must be an object")
    given = [k for k in ("cost_fp", "cost_matrix", "target") if objective.get(k) is not None]
    if objective.get("cost_fn") is not None and "cost_fp" not in given:
        given.append("cost_fp")
    if len(given) != 1:
        raise RuleError("objective", "give exactly one of cost_fp and cost_fn (together), "
                        "cost_matrix, target")
    if given[0] == "cost_matrix":
        return Objective("cost", matrix=check_matrix(objective["cost_matrix"], n_classes))
    default = 1 if n_classes == 2 else None
    given_positive = objective.get("positive")
    positive = _class_index(default if given_positive is None else given_positive, n_classes,
                            "positive")
    if given[0] == "cost_fp":
        if n_classes != 2:
            raise RuleError("cost_fp", f"needs two classes; this model has {n_classes}: "
                            "give cost_matrix")
        fp = _finite_nonnegative(objective.get("cost_fp"), "cost_fp")
        fn = _finite_nonnegative(objective.get("cost_fn"), "cost_fn")
        if fp == 0 and fn == 0:
            raise RuleError("cost_fp", "cost_fp and cost_fn are both 0")
        C = np.zeros((2, 2))
        C[1 - positive, positive], C[positive, 1 - positive] = fp, fn
        return Objective("cost", matrix=C, positive=positive, binary_costs=True)
    target = objective["target"]
    if target not in TARGETS:
        raise RuleError("target", f"must be one of {list(TARGETS)}, got {target!r}")
    value = _finite_nonnegative(objective.get("value"), "value")
    if value > 1:
        raise RuleError("value", f"must be a rate in [0, 1], got {value!r}")
    return Objective("target", target=target, value=value, positive=positive)


def candidate_thresholds(p: np.ndarray) -> np.ndarray:
    """Every threshold that gives a different ``p >= t`` split of the rows: the distinct
    values of p, increasing, then one above them all (nothing positive)."""
    values = np.unique(np.asarray(p, dtype=np.float64))
    return np.append(values, np.nextafter(values[-1], np.inf) if values.size else 1.0)


def rates(p: np.ndarray, positive: np.ndarray, thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """At each threshold t (increasing), the counts of ``p >= t`` against the truth
    ``positive`` (n,) bool: tp, fp, fn, tn (each (m,), from one sort)."""
    order = np.argsort(p, kind="stable")
    p_sorted, pos_sorted = p[order], positive[order]
    first = np.searchsorted(p_sorted, thresholds, side="left")  # rows below t: not predicted
    pos_below = np.concatenate([[0], np.cumsum(pos_sorted)])[first]
    n_pos = int(pos_sorted.sum())
    n_neg = p.size - n_pos
    tp = n_pos - pos_below
    fn = pos_below
    fp = (p.size - first) - tp
    tn = n_neg - fp
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn}


def cost_curve(p: np.ndarray, positive: np.ndarray, cost_fp: float, cost_fn: float,
               thresholds: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(thresholds, mean cost per row (cost_fp FP + cost_fn FN) / n at each)."""
    t = candidate_thresholds(p) if thresholds is None else np.asarray(thresholds, np.float64)
    r = rates(p, positive, t)
    return t, (cost_fp * r["fp"] + cost_fn * r["fn"]) / max(p.size, 1)


def _cost_threshold(p: np.ndarray, positive: np.ndarray, fp: float, fn: float) -> float:
    """The threshold of least empirical cost; among equal ones the closest to the Bayes
    threshold fp / (fp + fn) (what it is for calibrated probabilities)."""
    t, cost = cost_curve(p, positive, fp, fn)
    best = np.flatnonzero(cost <= cost.min() * (1 + 1e-12) + 1e-15)
    bayes = fp / (fp + fn)
    return float(t[best[np.argmin(np.abs(t[best] - bayes))]])


def _target_threshold(p: np.ndarray, positive: np.ndarray, target: str, value: float) -> float:
    t = candidate_thresholds(p)
    r = rates(p, positive, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        if target == "recall":
            ok = r["tp"] / np.maximum(r["tp"] + r["fn"], 1) >= value
            pick = np.flatnonzero(ok)[-1:] if ok.any() else np.array([], dtype=int)
        else:
            if target == "precision":
                ok = (r["tp"] + r["fp"] > 0) & (r["tp"] >= value * (r["tp"] + r["fp"]))
            else:
                ok = r["fp"] <= value * max(int((~positive).sum()), 1)
            pick = np.flatnonzero(ok)[:1]
    if pick.size == 0:
        raise RuleError("value", f"no threshold reaches {target} {value} on these rows")
    return float(t[pick[0]])


def fit_rule(objective: Objective, proba: np.ndarray, y_index: np.ndarray) -> dict[str, Any]:
    """The rule that meets ``objective`` on probabilities ``proba`` (n, k) of rows whose true
    classes are ``y_index`` (n,) (see the module's docstring)."""
    P = np.asarray(proba, dtype=np.float64)
    y = np.asarray(y_index)
    if objective.kind == "cost" and not objective.binary_costs:
        assert objective.matrix is not None
        return {"kind": "cost", "matrix": objective.matrix.tolist()}
    c = objective.positive
    p, positive = P[:, c], y == c
    if objective.kind == "cost":
        assert objective.matrix is not None
        fp, fn = objective.matrix[1 - c, c], objective.matrix[c, 1 - c]
        t = _cost_threshold(p, positive, float(fp), float(fn))
    else:
        assert objective.target is not None and objective.value is not None
        t = _target_threshold(p, positive, objective.target, objective.value)
    return {"kind": "threshold", "class_index": int(c), "threshold": min(t, 1.0)}


def mean_cost(matrix: np.ndarray, y_index: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(n,) the cost of each row's decision: C[true, predicted]."""
    return np.asarray(matrix, dtype=np.float64)[np.asarray(y_index), np.asarray(predicted)]


def rate_counts(target: str, positive: int, y_index: np.ndarray,
                predicted: np.ndarray) -> tuple[int, int]:
    """(successes, trials) of the rate ``target`` for class ``positive``: precision TP of
    TP + FP, recall TP of TP + FN, fpr FP of FP + TN."""
    truth, said = np.asarray(y_index) == positive, np.asarray(predicted) == positive
    if target == "precision":
        return int(np.sum(truth & said)), int(np.sum(said))
    if target == "recall":
        return int(np.sum(truth & said)), int(np.sum(truth))
    return int(np.sum(~truth & said)), int(np.sum(~truth))


def describe(rule: dict[str, Any], classes: list[Any] | None = None) -> str:
    """A short name of the rule, e.g. ``threshold P(bad) >= 0.1667``."""
    kind = rule["kind"]
    if kind != "threshold":
        return "argmax" if kind == "argmax" else "cost matrix (Bayes)"
    c = rule["class_index"]
    label = classes[c] if classes is not None else c
    return f"threshold P({label}) >= {rule['threshold']:.6g}"


__all__ = ["KINDS", "MAX_COST_CLASSES", "Objective", "RuleError", "TARGETS", "apply_rule",
           "candidate_thresholds", "check_matrix", "check_objective", "check_rule",
           "cost_curve", "describe", "fit_rule", "mean_cost", "rate_counts", "rates"]
