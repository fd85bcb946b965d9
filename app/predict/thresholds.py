"""``POST /models/{ref}/threshold``: a decision rule fitted on a model's out-of-fold
probabilities (never its hold-out), measured on its hold-out part, and stored — on the
registry alias the reference named (``credit@production``: the alias's history records it and a
rollback restores it) or on the stored model.

The out-of-fold probabilities are the model's calibrator applied to the out-of-fold decision
values its calibration was fitted on (app.models.decisions). The hold-out part is the model's
own (its dataset's rows that ``solver.split_indices`` left out of training, with the
model's test_fraction and seed), scored through the one scoring core with the fitted rule; a
cost's interval is scipy's bootstrap (BCa, 2,000 resamples, seed 0) of the mean cost per row,
a rate's the Wilson interval (``scipy.stats.binomtest``), both 95 %.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats
from sqlalchemy.orm import Session

from app.core.jsonable import jsonable
from app.core.problems import conflict, invalid
from app.core.runtime import runtime_of
from app.datasets import service as datasets
from app.models import service as models
from app.models.decisions import Decision, RuleError, read_oof, rule_text, set_model_rule
from app.models.features import dataset_features
from app.predict.threshold_schemas import ThresholdRequest
from app.registry import references
from app.registry import service as registry
from app.serving.acquire import acquire
from app.serving.evaluating import metrics_of
from app.serving.model import ServedModel
from app.serving.scoring import score
from app.serving.target import Target, reference_fields
from solver import (
    Objective,
    apply_rule,
    check_objective,
    cost_curve,
    fit_rule,
    mean_cost,
    rate_counts,
    rates,
    split_indices,
)
from solver import describe_rule as describe

_REF: list[str | int] = ["path", "model_ref"]
#: Thresholds of the curve: a grid over [0, 1] (and the chosen one).
CURVE_POINTS = 101
CONFIDENCE = 0.95


def _objective(loaded: ServedModel, body: ThresholdRequest) -> Objective:
    """The body's objective checked against the model (422 naming the field)."""
    classes = loaded.estimator.classes_
    raw = body.objective.model_dump()
    if raw.get("positive") is not None:
        given = raw["positive"]
        found = [i for i, c in enumerate(classes.tolist()) if c == given or str(c) == str(given)]
        if not found:
            raise invalid(["body", "objective", "positive"], f"{given!r} is not one of the "
                          f"model's classes {classes.tolist()}")
        raw["positive"] = found[0]
    try:
        return check_objective(raw, int(classes.size))
    except RuleError as exc:
        raise invalid(_loc(exc.field), exc.message) from None


def _as_given(objective: Objective, classes: list[Any]) -> dict[str, Any]:
    """The objective as a request gives it: ``positive`` the class label, not its index (the
    stored rule keeps the index, as solver.decision takes it)."""
    shown = objective.as_dict()
    if "positive" in shown:
        shown["positive"] = classes[shown["positive"]]
    return shown


def _loc(field: str) -> list[str | int]:
    """The request location of a solver.decision field: ``cost_matrix[1][0]`` ->
    ["body", "objective", "cost_matrix", 1, 0]; ``objective`` -> ["body", "objective"]."""
    name, *cells = field.replace("]", "").split("[")
    head: list[str | int] = ["body", "objective"]
    return head if name == "objective" else [*head, name, *map(int, cells)]


def oof_probabilities(session: Session, loaded: ServedModel) -> tuple[Any, np.ndarray]:
    """(P (n, k), true class indices (n,)) out of fold; 409 saying why a model has none."""
    est = loaded.estimator
    if not est.calibrated:
        raise conflict(f"model {loaded.id} has no probabilities (fitted with calibration="
                       "'none'): its label is the sign of its decision value, and no rule can "
                       "be fitted; train it with calibration 'sigmoid' or 'isotonic'")
    oof = read_oof(session, loaded.id)
    if oof is None:
        raise conflict(f"model {loaded.id} kept no out-of-fold decision values (trained "
                       "before they were kept): retrain it to fit a rule")
    D, idx = oof
    return est.probabilities(D), idx


def _holdout(session: Session, loaded: ServedModel) -> tuple[Any, np.ndarray] | None:
    """The model's hold-out rows (encoded, imputed) and their class indices; None when it
    has none or its dataset is gone."""
    row = models.get_or_raise(session, loaded.id)
    fraction = (row.params or {}).get("test_fraction")
    dataset = datasets.get(session, row.dataset_id) if row.dataset_id is not None else None
    if not fraction or not row.n_test or dataset is None:
        return None
    X, y = datasets.load_arrays(session, dataset)
    X = dataset_features(X, dataset, row)  # without the model's weight column
    _, test = split_indices(y, fraction, (row.params or {}).get("seed"))
    classes = loaded.estimator.classes_
    y_idx = models.match_labels(classes, y[test].tolist(), ["path", "model_ref"])
    return loaded.impute(X[test]), y_idx


def mean_with_interval(cost: np.ndarray) -> tuple[float, list[float]]:
    """The mean cost per row and its 95 % interval: scipy's bootstrap (BCa, 2,000 resamples,
    seed 0) of the mean; a point interval when the rows cannot vary it (one row, or all of
    one cost). The one interval of a cost: the threshold's hold-out and the leaderboard."""
    value = float(np.mean(cost))
    if cost.size < 2 or np.all(cost == cost[0]):
        return value, [value, value]
    ci = stats.bootstrap((cost,), np.mean, n_resamples=2000, confidence_level=CONFIDENCE,
                         random_state=0).confidence_interval
    return value, [float(ci.low), float(ci.high)]


def _measure(objective: Objective, y_idx: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """The objective's value on rows (true, predicted) with its 95 % interval."""
    n = int(y_idx.size)
    if objective.kind == "cost":
        assert objective.matrix is not None
        cost = mean_cost(objective.matrix, y_idx, predicted)
        value, interval = mean_with_interval(cost)
        return {"measure": "mean cost", "n": n, "value": value, "interval": interval}
    assert objective.target is not None
    k, trials = rate_counts(objective.target, objective.positive, y_idx, predicted)
    if trials == 0:
        return {"measure": objective.target, "n": n, "value": None, "interval": None}
    ci = stats.binomtest(k, trials).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return {"measure": objective.target, "n": n, "value": k / trials,
            "interval": [float(ci.low), float(ci.high)], "successes": k, "trials": trials}


def _curve(objective: Objective, rule: dict[str, Any], parts: dict[str, tuple[Any, Any]]
           ) -> dict[str, Any] | None:
    """The objective against the threshold on each part's probabilities (a grid over [0, 1]
    and the chosen threshold); None for a cost matrix's Bayes rule (no threshold)."""
    if rule["kind"] != "threshold":
        return None
    c = rule["class_index"]
    grid = np.union1d(np.linspace(0.0, 1.0, CURVE_POINTS), [rule["threshold"]])
    out: dict[str, Any] = {"threshold": grid.tolist(), "chosen": rule["threshold"],
                           "measure": "mean cost" if objective.kind == "cost"
                           else objective.target}
    for name, (P, y_idx) in parts.items():
        p, positive = P[:, c], y_idx == c
        if objective.kind == "cost":
            assert objective.matrix is not None
            fp, fn = objective.matrix[1 - c, c], objective.matrix[c, 1 - c]
            out[name] = cost_curve(p, positive, float(fp), float(fn), grid)[1].tolist()
        else:
            r = rates(p, positive, grid)
            num, den = {"precision": ("tp", ("tp", "fp")), "recall": ("tp", ("tp", "fn")),
                        "fpr": ("fp", ("fp", "tn"))}[objective.target or "recall"]
            total = r[den[0]] + r[den[1]]
            out[name] = [None if d == 0 else float(v / d) for v, d in zip(r[num], total,
                                                                          strict=True)]
    return out


def rule_evaluation(session: Session, loaded: ServedModel,
                    rule: dict[str, Any]) -> dict[str, Any] | None:
    """The model's evaluation (``metrics_of``, as its training's) of the labels ``rule``
    serves: on its hold-out part, through the scoring core; without one, on its out-of-fold
    probabilities (``source: cross-validated``); None with neither. Its ``decision_rule``
    names the rule."""
    classes = loaded.estimator.classes_
    named = {"decision_rule": {"name": describe(rule, classes.tolist()), "rule": rule}}
    held = _holdout(session, loaded)
    session.commit()  # read-only: end the transaction before computing
    if held is not None:
        scores = score(loaded, held[0], rule=Decision(rule, "model"))
        return {**metrics_of(classes, classes[held[1]], scores.index, scores.decision,
                             scores.probabilities), **named}
    oof = read_oof(session, loaded.id)
    session.commit()
    if oof is None or not loaded.estimator.calibrated:
        return None
    D, idx = oof
    P = loaded.estimator.probabilities(D)
    return {**metrics_of(classes, classes[idx], apply_rule(rule, P), D, P),
            "source": "cross-validated", **named}


def with_rule_evaluation(summary: dict[str, Any], evaluation: dict[str, Any]
                         ) -> tuple[dict[str, Any], float | None]:
    """(a model's summary whose ``evaluation`` and hold-out accuracy are those of the labels
    its rule serves, the training's evaluation kept beside as ``evaluation_argmax`` — its
    first, rule-less one —; the hold-out accuracy, None without a hold-out)."""
    out = dict(summary)
    if "evaluation_argmax" not in out and out.get("evaluation"):
        first = out["evaluation"]
        name = "sign" if first.get("source") == "cross-validated" else "argmax"
        out["evaluation_argmax"] = {**first, "decision_rule": {"name": name, "rule": None}}
    out["evaluation"] = evaluation
    accuracy = None
    if evaluation.get("source") != "cross-validated" and out.get("holdout"):
        accuracy = evaluation["accuracy"]
        out["holdout"] = {**out["holdout"], "accuracy": accuracy}
    return out, accuracy


def _store(session: Session, target: Target, loaded: ServedModel,
           rule: dict[str, Any], actor: str | None) -> str:
    """Store the rule where the reference points: its alias, else the model (whose reported
    hold-out accuracy and evaluation become those of the labels the rule serves). Committed."""
    text = rule_text(rule)
    resolved = target.resolved
    if resolved is not None and resolved.alias is not None and resolved.name is not None:
        registry.set_alias_rule(session, resolved.name, resolved.alias, text, actor)
        return "alias"
    evaluation = rule_evaluation(session, loaded, rule)
    set_model_rule(session, loaded.id, text)
    if evaluation is not None:
        row = models.get_or_raise(session, loaded.id)
        row.summary, accuracy = with_rule_evaluation(row.summary or {}, evaluation)
        if accuracy is not None:
            row.holdout_accuracy = accuracy
    session.commit()
    references.forget(session)
    # this process's cached copy carries the old rule: dropped, so that the next request
    # here serves the new one at once (other processes: after their recheck window)
    runtime_of(session).get(models.MODEL_CACHE).drop(loaded.id)
    return "model"


def fit_threshold(session: Session, ref: str, body: ThresholdRequest,
                  actor: str | None = None) -> dict[str, Any]:
    """The answer of ``POST /models/{ref}/threshold`` (see the module's docstring)."""
    loaded, target = acquire(runtime_of(session), Target(reference=ref), 0.0, None,
                             ref_loc=_REF, session=session)
    objective = _objective(loaded, body)
    P_oof, y_oof = oof_probabilities(session, loaded)
    rule = fit_rule(objective, P_oof, y_oof) if objective.kind == "cost" else _fit_target(
        objective, P_oof, y_oof)
    rule = {**rule, "objective": objective.as_dict()}
    held = _holdout(session, loaded)
    session.commit()  # read-only so far: end the transaction before computing
    classes = loaded.estimator.classes_.tolist()
    parts = {"oof": (P_oof, y_oof)}
    holdout = argmax = None
    if held is not None:
        scores = score(loaded, held[0], rule=Decision(rule, "request"))
        holdout = _measure(objective, held[1], scores.index)
        argmax = _measure(objective, held[1], np.argmax(scores.probabilities, axis=1))
        parts["holdout"] = (scores.probabilities, held[1])
    stored = _store(session, target, loaded, rule, actor) if body.store else None
    return jsonable({
        "model_id": loaded.id, **reference_fields(target), "stored_on": stored,
        "objective": _as_given(objective, classes), "rule": rule,
        "decision_rule": describe(rule, classes),
        "threshold": rule.get("threshold"),
        "oof": _measure(objective, y_oof, apply_rule(rule, P_oof)),
        "holdout": holdout, "holdout_argmax": argmax,
        "curve": _curve(objective, rule, parts),
    })


def _fit_target(objective: Objective, P: Any, y: np.ndarray) -> dict[str, Any]:
    try:
        return fit_rule(objective, P, y)
    except RuleError as exc:
        raise invalid(_loc(exc.field),
                      f"{exc.message} (the model's out-of-fold probabilities)") from None


def threshold_figure(answer: dict[str, Any], fmt: str) -> bytes:
    """The answer's curve drawn (app.models.figures); 422 for a rule without a threshold."""
    from app.models.figures import render_threshold_curve

    if answer["curve"] is None:
        raise invalid(["body", "objective", "cost_matrix"],
                      "a cost matrix's Bayes rule has no threshold to draw a curve of")
    title = f"model {answer['model_id']}: {answer['decision_rule']}"
    return render_threshold_curve(answer["curve"], title=title, fmt=fmt)
