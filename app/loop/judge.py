"""The retraining policies' judge: the challenger's record beside production's on its own rows,
and the verdict (``app.loop.policies`` calls ``record`` then ``verdict``).

Where the production alias has a canary of the challenger's version (``judge.canary_percent``),
the challenger is judged by its canary arm: the rows it answered through the alias and their
feedback, beside the rows the alias's own version answered meanwhile (``app.monitoring.arms``:
each arm on its own rows; the arms split the keys at random, so they see the same traffic).
Without a canary it is judged by its shadow (``app.monitoring.shadow_service``: both scored
the same live rows). The shadow's ``agreement`` is in the record either way. For each side:

* ``accuracy``: realised on its fed-back rows;
* ``estimated_accuracy``: the label-free estimate of all its rows (confidence-based, as the
  monitoring report's ``performance_estimate``: ``solver.expected_accuracy`` of the model's
  calibrated probabilities of the logged decision values; null for an uncalibrated model, or
  for a shadow of more than two classes, whose rows keep the predicted class's score only);
* ``cost``: the mean cost per fed-back row of the labels it gave, under the production alias's
  decision rule (``solver.decision``): its cost matrix (a ``cost`` rule, or a rule fitted to
  ``cost_fp``/``cost_fn`` or ``cost_matrix``), else 1 per wrong label (the error rate). A
  canary's labels are the alias's rule carried to its version; the challenger alias is given
  production's rule too (``policies``), so its shadow labels are the ones it would serve.

``verdict``: the challenger wins when it has at least ``min_rows`` fed-back rows (with a
canary: each arm), its realised accuracy beats production's by ``margin``, its cost is not
higher, and its hold-out accuracy is within ``holdout_tolerance`` of production's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.jsonable import jsonable
from app.core.problems import Problem
from app.core.runtime import Runtime
from app.loop.schemas import Judge
from app.models import service as models
from app.monitoring import arms, shadow_service
from app.registry import service as registry
from app.registry.orm import ModelVersion, RegisteredModel
from app.serving.acquire import acquire
from app.serving.target import Target
from solver import check_objective, expected_accuracy, mean_cost


@dataclass(frozen=True)
class Pair:
    """Who is judged: the challenger's and the served version (and stored models), on the
    production alias's rows logged since ``since``."""

    registered: RegisteredModel
    alias: str
    challenger: tuple[int, int]  # (version, model id)
    served: tuple[int, int]
    since: datetime


def pair_of(session: Session, registered: RegisteredModel, alias: str, challenger: int,
            served: int, since: datetime) -> Pair | None:
    """The Pair of two versions (None when either was deleted)."""
    ids = []
    for version in (challenger, served):
        found = session.get(ModelVersion, (registered.id, version))
        if found is None:
            return None
        ids.append((version, found.model_id))
    return Pair(registered, alias, ids[0], ids[1], since)


def _estimator(runtime: Runtime, session: Session, model_id: int) -> Any | None:
    try:
        return acquire(runtime, Target(model_id), 0.0, None, session=session).model.estimator
    except Problem:
        return None


def estimate(estimator: Any | None, decision: np.ndarray, predicted: np.ndarray) -> float | None:
    """The label-free estimated accuracy of rows with these logged decision values (binary:
    (n,); more classes: (n, k)) and predicted class indices; None without probabilities."""
    if estimator is None or not estimator.calibrated or len(predicted) == 0:
        return None
    wide = len(estimator.classes_) > 2
    if wide != (decision.ndim == 2):
        return None
    return expected_accuracy(estimator.probabilities(decision), predicted)["estimate"]


def cost_matrix(rule_text: str | None, n_classes: int) -> tuple[np.ndarray, str]:
    """The production alias's rule's cost matrix and what it is: its costs, else 0-1."""
    rule = json.loads(rule_text) if rule_text else {}
    if rule.get("kind") == "cost":
        return np.asarray(rule["matrix"], dtype=np.float64), "the alias's cost matrix"
    objective = rule.get("objective") or {}
    if objective.get("cost_fp") is not None or objective.get("cost_matrix") is not None:
        matrix = check_objective(objective, n_classes).matrix
        assert matrix is not None
        return matrix, "the alias's costs " + json.dumps(objective, sort_keys=True)
    return 1.0 - np.eye(n_classes), "1 per wrong label (the alias's rule has no costs)"


def _cost(matrix: np.ndarray, true: np.ndarray, predicted: np.ndarray) -> float | None:
    fed = true >= 0
    if not fed.any() or predicted.max(initial=0) >= len(matrix):
        return None
    return float(np.mean(mean_cost(matrix, true[fed], predicted[fed])))


def _side(accuracy: float | None, labelled: int, est: float | None, cost: float | None,
          n: int) -> dict[str, Any]:
    return {"n": n, "labelled": labelled, "accuracy": accuracy, "estimated_accuracy": est,
            "cost": cost}


def _shadow(session: Session, runtime: Runtime, pair: Pair,
            matrix: np.ndarray) -> dict[str, Any]:
    rows = shadow_service.paired_rows(session, pair.registered.id, pair.challenger[1],
                                      pair.served[1], pair.since)
    rec = shadow_service.head_to_head(session, pair.registered.id, pair.challenger[1],
                                      pair.served[1], pair.since, rows)
    out = {"n": rec["n"], "agreement": rec["agreement"], "labelled": rec["labelled"]}
    for side, pre, model_id in (("challenger", "", pair.challenger[1]),
                                ("served", "served_", pair.served[1])):
        predicted = rows[f"{pre}predicted"]
        out[side] = _side(rec[f"{side}_accuracy"], rec["labelled"],
                          estimate(_estimator(runtime, session, model_id),
                                   rows[f"{pre}decision"], predicted),
                          _cost(matrix, rows["true"], predicted), rec["n"])
    return out


def _canary(session: Session, runtime: Runtime, pair: Pair,
            matrix: np.ndarray) -> dict[str, Any] | None:
    """The two arms' records, when the alias's canary is the challenger's version."""
    canary = registry.canaries_of(session, pair.registered).get(pair.alias)
    if canary is None or canary[0] != pair.challenger[0]:
        return None
    found = {(r.version, r.model_id): r for r in arms.arm_records(
        session, pair.registered.name, pair.alias, pair.since)}
    out: dict[str, Any] = {"percent": canary[1]}
    for side, (version, model_id) in (("challenger", pair.challenger),
                                      ("served", pair.served)):
        arm = found.get((version, model_id))
        rows = arms.arm_rows(session, pair.registered.name, pair.alias, version, pair.since)
        out[side] = {"version": version, "arm": "canary" if side == "challenger" else "primary",
                     **_side(arm.accuracy if arm else None, arm.n_labelled if arm else 0,
                             estimate(_estimator(runtime, session, model_id),
                                      rows["decision"], rows["predicted"]),
                             _cost(matrix, rows["true"], rows["predicted"]),
                             arm.n if arm else 0)}
    return out


def record(session: Session, runtime: Runtime, pair: Pair) -> dict[str, Any]:
    """The challenger's record beside the served version's (see the module's docstring):
    ``source`` (``canary`` or ``shadow``), the judged rows' figures at the top (``labelled``,
    each side's ``accuracy``, ``estimated_accuracy``, ``cost``), the shadow's ``agreement``,
    both hold-out accuracies, and the ``shadow`` and ``canary`` records whole."""
    served_model = models.get(session, pair.served[1])
    challenger_model = models.get(session, pair.challenger[1])
    k = len(served_model.classes) if served_model is not None else 2
    matrix, cost_basis = cost_matrix(
        registry.alias_rule(session, pair.registered, pair.alias), k)
    shadow = _shadow(session, runtime, pair, matrix)
    canary = _canary(session, runtime, pair, matrix)
    judged = canary if canary is not None else shadow
    rec: dict[str, Any] = {
        "source": "canary" if canary is not None else "shadow",
        "since": pair.since, "challenger_version": pair.challenger[0],
        "served_version": pair.served[0], "challenger_model_id": pair.challenger[1],
        "served_model_id": pair.served[1],
        "labelled": min(judged["challenger"]["labelled"], judged["served"]["labelled"]),
        "agreement": shadow["agreement"], "n": shadow["n"], "cost_basis": cost_basis,
        "challenger_holdout_accuracy": getattr(challenger_model, "holdout_accuracy", None),
        "served_holdout_accuracy": getattr(served_model, "holdout_accuracy", None),
        "shadow": shadow, "canary": canary,
    }
    for side in ("challenger", "served"):
        for figure in ("accuracy", "estimated_accuracy", "cost"):
            rec[f"{side}_{figure}"] = judged[side][figure]
    return jsonable(rec)


def verdict(rec: dict[str, Any], judge: Judge) -> tuple[bool | None, dict[str, Any]]:
    """(True: the challenger wins, False: it loses, None: too few fed-back rows yet) and the
    evidence: the record with the gain, the cost's change and the judge's terms."""
    evidence = {**rec, "margin": judge.margin, "min_rows": judge.min_rows,
                "holdout_tolerance": judge.holdout_tolerance}
    if rec["labelled"] < judge.min_rows or rec["challenger_accuracy"] is None \
            or rec["served_accuracy"] is None:
        return None, evidence
    gain = rec["challenger_accuracy"] - rec["served_accuracy"]
    costs = rec["challenger_cost"], rec["served_cost"]
    cost_ok = None in costs or costs[0] <= costs[1]
    hold = rec["challenger_holdout_accuracy"], rec["served_holdout_accuracy"]
    holdout_ok = None in hold or hold[0] >= hold[1] - judge.holdout_tolerance
    evidence.update(gain=gain, cost_change=None if None in costs else costs[0] - costs[1],
                    cost_ok=cost_ok, holdout_ok=holdout_ok)
    return bool(gain >= judge.margin and cost_ok and holdout_ok), evidence
