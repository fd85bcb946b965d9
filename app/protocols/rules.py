"""A protocol request's own decision rule, as /predict's ``rule`` and ``threshold``: the
Open Inference Protocol's request ``parameters`` and MLflow's ``params`` may hold
``decision_rule`` ("argmax") or ``threshold`` (a number in [0, 1]); the rule of the reference
applies otherwise (app.predict.service.decision_for, which checks the rest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.core.problems import Problem

#: The members a request may set them with.
RULE_KEYS = ("decision_rule", "threshold")


def request_rule(parameters: dict[str, Any], error: Callable[[int, str], Problem],
                 prefix: str = "parameters") -> tuple[str | None, float | None]:
    """(rule, threshold) of the request's ``parameters``; ``error(400, message)`` naming the
    member of the wrong type or value."""
    rule, threshold = parameters.get("decision_rule"), parameters.get("threshold")
    if rule is not None and rule != "argmax":
        raise error(400, f"{prefix}.decision_rule: {rule!r} is not a rule a request can set "
                    "(\"argmax\"; or give a threshold)")
    if threshold is not None and (isinstance(threshold, bool)
                                  or not isinstance(threshold, int | float)
                                  or not 0.0 <= threshold <= 1.0):
        raise error(400, f"{prefix}.threshold: {threshold!r} is not a number in [0, 1]")
    return rule, None if threshold is None else float(threshold)
