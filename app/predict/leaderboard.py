"""The leaderboard: several models side by side on one hold-out.

The models are a dataset's newest ones, or a list of references. They are compared on the rows
that are in **every** model's hold-out (each model's ``holdout.rows``: rows none of them trained
on), never on different rows: models of different datasets, or whose hold-outs share no row,
are answered as not comparable, with the reason; a model that kept no hold-out is left out with
its reason. Each model scores those rows through the one scoring core (app.serving.scoring):
the labels it serves, by the decision rule of the reference it was named by
(app.serving.codec.decision_for: the alias's rule, else the model's), and its probabilities.
They are measured by the one metrics function (app.serving.evaluating.metrics_of, i.e.
``solver.evaluation.evaluate``: sklearn.metrics), plus the expected cost of the served labels
under a cost rule (``expected_cost``: solver.decision.mean_cost, the one cost of the decision
rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.pagination import PageParams
from app.core.problems import invalid
from app.core.runtime import runtime_of
from app.datasets import service as datasets
from app.models import service as models
from app.models.features import dataset_features, feature_match
from app.predict.leaderboard_schemas import CostRule, LeaderboardRequest
from app.predict.thresholds import mean_with_interval
from app.serving.acquire import acquire
from app.serving.codec import decision_for
from app.serving.evaluating import metrics_of
from app.serving.model import ServedModel
from app.serving.scoring import score
from app.serving.target import Target, reference_fields, resolve_target
from solver import mean_cost

HIGHER_IS_BETTER = {"accuracy": True, "balanced_accuracy": True, "roc_auc": True,
                    "pr_auc": True, "log_loss": False, "ece": False, "expected_cost": False}
METRICS = tuple(HIGHER_IS_BETTER)


@dataclass(frozen=True)
class Candidate:
    """A model to compare: its row, and the reference it was named by (None: by dataset)."""

    row: Any  # the stored model's row (app.models.orm.Model)
    reference: str | None = None
    target: Target | None = None


def dataset_candidates(
    session: Session, dataset_id: int, limit: int, loc: list[str | int] | None
) -> tuple[list[Candidate], bool]:
    """The newest ``limit`` models of the dataset (404, or 422 naming ``loc``, when there is no
    such dataset), and whether it has more."""
    datasets.get_or_raise(session, dataset_id, loc)
    rows, more = models.list_page(session, PageParams(limit=limit, after_id=None),
                                  dataset_id=dataset_id)
    return [Candidate(row) for row in rows], more is not None


def reference_candidates(session: Session, refs: list[str]) -> list[Candidate]:
    """The models the references name (each a 422 naming ``models[i]`` when malformed or given
    twice, a 404 when unknown)."""
    runtime = runtime_of(session)
    out: list[Candidate] = []
    seen: dict[int, int] = {}
    for i, ref in enumerate(refs):
        loc: list[str | int] = ["body", "models", i]
        text = ref.strip()
        if not text:
            raise invalid(loc, "an empty reference: give a model id or name@alias")
        target = resolve_target(runtime, Target(reference=text), loc)
        assert target.model_id is not None
        if target.model_id in seen:
            raise invalid(loc, f"{text!r} is model {target.model_id}, already given as "
                          f"models[{seen[target.model_id]}]")
        seen[target.model_id] = i
        out.append(Candidate(models.get_or_raise(session, target.model_id, loc), text, target))
    return out


def check_cost_fields(request: LeaderboardRequest, where: str) -> None:
    """422 naming the field: both kinds of rule, one of cost_fp/cost_fn alone, expected_cost
    without a rule, a matrix that is not square or holds a negative or non-finite cost."""
    binary = request.cost_fp is not None or request.cost_fn is not None
    if binary and request.cost_matrix is not None:
        raise invalid([where, "cost_matrix"], "give cost_fp and cost_fn, or cost_matrix, "
                      "not both")
    if binary and (request.cost_fp is None or request.cost_fn is None):
        field = "cost_fn" if request.cost_fn is None else "cost_fp"
        raise invalid([where, field], "give cost_fp and cost_fn together")
    if request.metric == "expected_cost" and not binary and request.cost_matrix is None:
        raise invalid([where, "metric"], "expected_cost needs a cost rule: give cost_fp and "
                      "cost_fn (binary), or cost_matrix")
    matrix = request.cost_matrix
    if matrix is not None:
        for i, row in enumerate(matrix):
            if len(row) != len(matrix):
                raise invalid([where, "cost_matrix", i], f"row {i} has {len(row)} costs; the "
                              f"matrix must be {len(matrix)} × {len(matrix)}")
            for j, v in enumerate(row):
                if not np.isfinite(v) or v < 0:
                    raise invalid([where, "cost_matrix", i, j],
                                  f"must be a finite cost >= 0, got {v!r}")


def cost_rule(request: LeaderboardRequest, classes: list[Any], where: str) -> CostRule | None:
    """The request's cost rule for models of ``classes`` (422 naming the field when it does
    not fit them); None without one."""
    if request.cost_matrix is not None:
        if len(request.cost_matrix) != len(classes):
            raise invalid([where, "cost_matrix"], f"{len(request.cost_matrix)} rows; the models "
                          f"have {len(classes)} classes {classes}: give {len(classes)} × "
                          f"{len(classes)} costs")
        return CostRule(labels=classes, matrix=request.cost_matrix)
    if request.cost_fp is None or request.cost_fn is None:
        return None
    if len(classes) != 2:
        raise invalid([where, "cost_fp"], f"cost_fp and cost_fn need two classes; the models "
                      f"have {len(classes)} {classes}: give cost_matrix")
    matrix = [[0.0, request.cost_fp], [request.cost_fn, 0.0]]
    return CostRule(labels=classes, matrix=matrix, positive_class=classes[1])


def expected_cost(y_true: np.ndarray, index: np.ndarray, classes: np.ndarray,
                  matrix: list[list[float]]) -> tuple[float, list[float]] | None:
    """Mean cost per row of the served labels ``classes[index]`` and its 95 % interval:
    ``solver.decision.mean_cost`` (C[true, served]) with the bootstrap interval of POST
    /models/{ref}/threshold's hold-out cost (``mean_with_interval``), over the rows whose true
    label is one of ``classes`` (None when no row is)."""
    known = np.isin(y_true, classes)
    if not known.any():
        return None
    y_index = np.searchsorted(classes, y_true[known])
    return mean_with_interval(mean_cost(np.asarray(matrix), y_index, index[known]))


@dataclass
class Comparison:
    """Which candidates are compared, on which dataset rows, and who is left out (and why);
    ``reason`` says why they cannot be compared at all (then ``rows`` is empty)."""

    kept: list[Candidate]
    excluded: list[dict[str, Any]]
    rows: np.ndarray
    dataset: Any = None  # the dataset's row (app.datasets.orm.Dataset)
    reason: str | None = None


def _not_comparable(kept: list[Candidate], excluded: list[dict[str, Any]],
                    reason: str) -> Comparison:
    return Comparison(kept, excluded, np.empty(0, dtype=np.int64), None, reason)


def _shared(kept: list[Candidate]) -> np.ndarray:
    rows = np.asarray(models.holdout_rows(kept[0].row), dtype=np.int64)
    for c in kept[1:]:
        rows = np.intersect1d(rows, np.asarray(models.holdout_rows(c.row), dtype=np.int64))
    return np.unique(rows)


def compare(session: Session, candidates: list[Candidate]) -> Comparison:
    """The rows every kept candidate held out: candidates without a hold-out are left out; the
    rest must be of one existing dataset and share at least one hold-out row."""
    excluded = [{"model_id": c.row.id,
                 "reason": f"model {c.row.id} kept no hold-out (trained on every row, "
                 "test_fraction null, or trained before hold-out rows were kept): no row is "
                 "unseen by it"} for c in candidates if models.holdout_rows(c.row) is None]
    kept = [c for c in candidates if models.holdout_rows(c.row) is not None]
    if not kept:
        return _not_comparable(kept, excluded, "no model kept a hold-out" if candidates
                               else "there is no model to compare")
    by_dataset = {c.row.dataset_id for c in kept}
    if len(by_dataset) > 1:
        which = "; ".join(f"model {c.row.id}: dataset {c.row.dataset_id}" for c in kept)
        return _not_comparable(kept, excluded, "the models were trained on different datasets "
                               f"({which}), so they share no hold-out row")
    dataset_id = by_dataset.pop()
    dataset = None if dataset_id is None else datasets.get(session, dataset_id)
    if dataset is None:
        which = "" if dataset_id is None else f" ({dataset_id})"
        return _not_comparable(kept, excluded, f"the dataset the models were trained on{which} "
                               "was deleted: their hold-out rows are gone")
    unlike = [c for c in kept if not feature_match(dataset, c.row)]
    if unlike:
        return _not_comparable(kept, excluded, f"the features of model {unlike[0].row.id} are "
                               f"not those of dataset {dataset.id} any more")
    rows = _shared(kept)
    if rows.size == 0:
        sizes = ", ".join(f"model {c.row.id}: {len(models.holdout_rows(c.row) or [])}"
                          for c in kept)
        return _not_comparable(kept, excluded, "the models' hold-outs share no row (hold-out "
                               f"rows {sizes}); train them with the same test_fraction and "
                               "seed to compare them")
    if int(rows[-1]) >= dataset.n_rows:
        return _not_comparable(kept, excluded, f"dataset {dataset.id} has {dataset.n_rows} "
                               "rows now, fewer than when the models were trained")
    return Comparison(kept, excluded, rows, dataset)


def _number(value: Any) -> float | None:
    """binary ranking metric: the number; multi-class: the macro mean."""
    return value.get("macro") if isinstance(value, dict) else value


def _notes(entry: dict[str, Any], calibrated: bool, has_cost: bool) -> dict[str, str]:
    notes = {}
    for name in ("log_loss", "ece"):
        if entry[name] is None:
            notes[name] = ("the model is not calibrated (calibration none): it serves no "
                           "probabilities" if not calibrated
                           else "no compared row has a label among the model's classes")
    for name in ("roc_auc", "pr_auc"):
        if entry[name] is None:
            notes[name] = "no class has both positive and negative rows among the compared rows"
    if entry["expected_cost"] is None:
        notes["expected_cost"] = ("no cost rule given (cost_fp and cost_fn, or cost_matrix)"
                                  if not has_cost else "no compared row has a label among "
                                  "the model's classes")
    return notes


def score_candidate(candidate: Candidate, loaded: ServedModel, X: Any,
                    y_true: np.ndarray, cost: CostRule | None) -> dict[str, Any]:
    """The candidate's entry: the metrics of the labels and probabilities it serves for the
    rows X (the dataset's compared rows, encoded) with true labels ``y_true``."""
    row, target = candidate.row, candidate.target
    classes = loaded.estimator.classes_
    # the rule that labels what this reference serves: its alias's, else the model's
    rule = decision_for(loaded, target or Target(model_id=row.id))
    scores = score(loaded, loaded.impute(X.copy()), rule=rule)  # (scales its rows in place)
    m = metrics_of(classes, y_true, scores.index, scores.decision, scores.probabilities)
    entry: dict[str, Any] = {
        "model_id": row.id,
        "reference": candidate.reference,
        **(reference_fields(target) if target else
           {"model": None, "version": None, "alias": None}),
        "algorithm": row.algorithm,
        "calibration": (row.params or {}).get("calibration") or "none",
        "created_at": row.created_at,
        "n_holdout": len(models.holdout_rows(row) or ()),
        "decision_rule": scores.rule_json(),
        "accuracy": m["accuracy"],
        "balanced_accuracy": m["balanced_accuracy"],
        "roc_auc": _number(m["roc_auc"]),
        "pr_auc": _number(m["pr_auc"]),
        "log_loss": m["log_loss"],
        "ece": m["ece"],
    }
    measured = None if cost is None else expected_cost(y_true, scores.index, classes,
                                                       cost.matrix)
    entry["expected_cost"], entry["expected_cost_interval"] = measured or (None, None)
    entry["notes"] = _notes(entry, scores.probabilities is not None, cost is not None)
    return entry


def rank(entries: list[dict[str, Any]], metric: str) -> list[int]:
    """Order ``entries`` best first by ``metric`` (nulls last), set each one's ``rank`` (ties
    share one) and ``best``; the ids of the best."""
    sign = -1.0 if HIGHER_IS_BETTER[metric] else 1.0
    entries.sort(key=lambda e: (e[metric] is None, sign * (e[metric] or 0.0), e["model_id"]))
    previous: Any = object()
    for position, e in enumerate(entries, start=1):
        if e[metric] != previous:
            current, previous = position, e[metric]
        e["rank"] = current
    top = entries[0][metric] if entries else None
    for e in entries:
        e["best"] = top is not None and e[metric] == top
    return [e["model_id"] for e in entries if e["best"]]


def _candidates(session: Session, request: LeaderboardRequest,
                where: str) -> tuple[list[Candidate], bool]:
    """The models the request names, and whether a dataset has more than ``limit``."""
    if (request.models is None) == (request.dataset_id is None):
        raise invalid([where, "models"], "give exactly one of models and dataset_id")
    if request.models is not None:
        return reference_candidates(session, request.models), False
    assert request.dataset_id is not None
    loc: list[str | int] | None = [where, "dataset_id"] if where == "body" else None
    return dataset_candidates(session, request.dataset_id, request.limit, loc)


def _rule_of(request: LeaderboardRequest, kept: list[Candidate], where: str) -> CostRule | None:
    """The cost rule for the kept models (422 naming the cost field when their classes
    differ, so no one matrix fits them all)."""
    classes = [list(c.row.classes) for c in kept]
    if any(other != classes[0] for other in classes[1:]):
        if request.cost_matrix is not None or request.cost_fp is not None:
            field = "cost_matrix" if request.cost_matrix is not None else "cost_fp"
            raise invalid([where, field], "the models have different classes ("
                          + "; ".join(f"model {c.row.id}: {list(c.row.classes)}" for c in kept)
                          + "): no one cost rule fits them")
        return None
    return cost_rule(request, classes[0], where)


def leaderboard(session: Session, request: LeaderboardRequest, where: str) -> dict[str, Any]:
    """The leaderboard's answer (app.predict.leaderboard_schemas.LeaderboardOut). ``where``:
    "body" or "query", the place 422s name the request's fields in."""
    check_cost_fields(request, where)
    candidates, truncated = _candidates(session, request, where)
    comparison = compare(session, candidates)
    answer: dict[str, Any] = {
        "dataset_id": comparison.dataset.id if comparison.dataset else None,
        "metric": request.metric, "higher_is_better": HIGHER_IS_BETTER[request.metric],
        "comparable": comparison.reason is None, "reason": comparison.reason,
        "n_rows": int(comparison.rows.size), "cost": None, "best": [], "models": [],
        "excluded": comparison.excluded, "n_models": len(candidates), "truncated": truncated,
    }
    if comparison.reason is not None:
        session.commit()
        return answer
    cost = _rule_of(request, comparison.kept, where)
    runtime = runtime_of(session)
    loaded = [acquire(runtime, Target(c.row.id, stamp=c.target.stamp if c.target else None),
                      0.0, None, session=session).model for c in comparison.kept]
    assert comparison.dataset is not None
    X, y = datasets.load_arrays(session, comparison.dataset)
    session.commit()  # read-only: end the transaction before computing
    X, y_true = X[comparison.rows], y[comparison.rows]
    entries = [score_candidate(c, m, dataset_features(X, comparison.dataset, c.row), y_true,
                               cost)
               for c, m in zip(comparison.kept, loaded, strict=True)]
    answer.update(cost=cost, best=rank(entries, request.metric), models=entries)
    return answer
