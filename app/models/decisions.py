"""Which decision rule labels a model's rows, and the out-of-fold values a rule is fitted on.

A calibrated model keeps its calibration's out-of-fold decision values and the training rows'
class indices (``oof_decision_``, ``oof_index_``: solver._base) as two of its arrays
(``oof.decision``, ``oof.index``; npy, as every stored array), read only when a rule is
fitted; its out-of-fold probabilities are its calibrator applied to them.

The rule that labels a request's rows (``Decision``), in order: the request's own override
(``rule: "argmax"`` or ``threshold``), the rule of the registry alias it named, the stored
model's rule, the default (argmax of the probabilities; an uncalibrated model: the sign of the
decision value, ``rule`` None). Every answer names it (``Decision.name``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from solver import RuleError, apply_rule, check_rule
from solver import describe_rule as describe

OOF_PREFIX = "oof."
OOF_DECISION = OOF_PREFIX + "decision"
OOF_INDEX = OOF_PREFIX + "index"
#: The rule of a model without probabilities (its label is the decision value's sign).
SIGN = "sign"


def oof_arrays(estimator: Any) -> dict[str, np.ndarray]:
    """The estimator's out-of-fold arrays to store with it (none when uncalibrated)."""
    oof = estimator.out_of_fold()
    if oof is None:
        return {}
    D, idx = oof
    return {OOF_DECISION: np.asarray(D, dtype=np.float64),
            OOF_INDEX: np.asarray(idx, dtype=np.int64)}


def stored_rule(text: str | None, estimator: Any) -> dict[str, Any] | None:
    """A stored rule (JSON text) checked against the estimator's classes; None for none."""
    if text is None:
        return None
    try:
        return _parsed(text, int(len(estimator.classes_)))
    except (ValueError, TypeError):  # not written by this service: served by the default
        return None


def _parsed(text: str, n_classes: int) -> dict[str, Any]:
    """A stored rule checked (``check_rule``), with the objective it was fitted to, if any."""
    raw = json.loads(text)
    rule = check_rule(raw, n_classes)
    if isinstance(raw, dict) and isinstance(raw.get("objective"), dict):
        rule["objective"] = raw["objective"]
    return rule


def rule_text(rule: dict[str, Any] | None) -> str | None:
    """The rule as stored (canonical JSON text), None for none."""
    return None if rule is None else json.dumps(rule, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Decision:
    """The rule that labels rows: ``rule`` (solver.decision; None: the decision's sign) and
    where it came from: "request", "alias", "model" or "default"."""

    rule: dict[str, Any] | None
    source: str

    def name(self, classes: list[Any] | None = None) -> str:
        return SIGN if self.rule is None else describe(self.rule, classes)

    def as_json(self, classes: list[Any] | None = None) -> dict[str, Any]:
        """The answer's ``decision_rule``: {"name", "source", "rule"}."""
        return {"name": self.name(classes), "source": self.source, "rule": self.rule}

    def labels(self, proba: np.ndarray | None, decision: np.ndarray) -> np.ndarray:
        """(n,) label indices: the rule applied to the probabilities, or the decision's sign
        (binary; the highest one-vs-rest score otherwise) without them."""
        if self.rule is None or proba is None:
            D = np.asarray(decision)
            return (D > 0).astype(np.intp) if D.ndim == 1 else np.argmax(D, axis=1)
        return apply_rule(self.rule, proba)


def override_rule(calibrated: bool, n_classes: int, rule: str | None,
                  threshold: float | None) -> dict[str, Any] | None:
    """A request's explicit rule (``rule="argmax"`` or ``threshold`` on P(classes[1])), None
    when it gives none; RuleError naming the field when it cannot apply."""
    if rule is not None and threshold is not None:
        raise RuleError("threshold", "give at most one of rule and threshold")
    if rule is None and threshold is None:
        return None
    if not calibrated:
        raise RuleError("threshold" if threshold is not None else "rule",
                        "the model has no probabilities (fitted with calibration='none'): "
                        "its label is the decision value's sign")
    if rule is not None:
        if rule != "argmax":
            raise RuleError("rule", f"must be 'argmax', got {rule!r}")
        return {"kind": "argmax"}
    if n_classes != 2:
        raise RuleError("threshold", f"needs two classes; the model has {n_classes}")
    return check_rule({"kind": "threshold", "class_index": 1, "threshold": threshold}, 2)


def choose(calibrated: bool, n_classes: int, model_rule: dict[str, Any] | None,
           alias_rule: str | None = None, override: dict[str, Any] | None = None) -> Decision:
    """The rule that labels a request's rows (see the module's docstring)."""
    if not calibrated:
        return Decision(None, "default")
    if override is not None:
        return Decision(override, "request")
    if alias_rule is not None:
        try:
            return Decision(_parsed(alias_rule, n_classes), "alias")
        except (ValueError, TypeError):
            pass
    if model_rule is not None:
        return Decision(model_rule, "model")
    return Decision({"kind": "argmax"}, "default")


__all__ = ["OOF_DECISION", "OOF_INDEX", "OOF_PREFIX", "SIGN", "Decision", "RuleError",
           "choose", "oof_arrays", "override_rule", "rule_text", "stored_rule"]


def read_oof(session: Any, model_id: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The stored model's out-of-fold decision values and true class indices, or None when it
    kept none (fitted without calibration, or before they were kept)."""
    from app.core import storage
    from app.models.orm import ModelArray

    arrays = storage.read_arrays(session, ModelArray, model_id, only=OOF_PREFIX)
    if OOF_DECISION not in arrays or OOF_INDEX not in arrays:
        return None
    return arrays[OOF_DECISION], arrays[OOF_INDEX]


def carried_rule(estimator: Any, oof: tuple[np.ndarray, np.ndarray] | None,
                 text: str | None) -> str | None:
    """An alias's rule (JSON text) for the version it moves to, whose ``estimator`` and
    out-of-fold values (``read_oof``) are given: a fitted rule's objective refitted on that
    model's out-of-fold probabilities, a fixed rule as it is; None (its version's rule) when
    the model cannot take it (no probabilities or out-of-fold values, other classes)."""
    if text is None or not estimator.calibrated:
        return None
    from solver import check_objective, fit_rule

    try:
        raw = json.loads(text)
        k = int(len(estimator.classes_))
        objective = raw.get("objective")
        if objective is None:
            return rule_text(check_rule(raw, k))
        checked = check_objective(objective, k)
        if oof is None:
            return None
        rule = fit_rule(checked, estimator.probabilities(oof[0]), oof[1])
        return rule_text({**rule, "objective": checked.as_dict()})
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def model_rule_text(session: Any, model_id: int) -> str | None:
    """The stored model's own rule as stored (JSON text), None without one."""
    from app.models.orm import ModelRule

    row = session.get(ModelRule, model_id)
    return None if row is None else row.rule


def set_model_rule(session: Any, model_id: int, text: str | None) -> None:
    """Store (None: remove) the model's own rule; the caller commits."""
    from app.models.orm import ModelRule

    row = session.get(ModelRule, model_id)
    if text is None:
        if row is not None:
            session.delete(row)
    elif row is None:
        session.add(ModelRule(model_id=model_id, rule=text))
    else:
        row.rule = text
