"""The one scoring core: a served model and a feature matrix in, arrays out.

Every door that answers with a model's predictions — ``/predict`` (rows, records, files), the
Open Inference Protocol's ``/v2`` (tensors in as arrays), MLflow's invocations, shadow scoring —
is a codec into ``score`` and out of its ``Scores``; none scales, computes decision values or
picks labels itself. Beside it live what every door checks the same way: the row limit
(``check_rows``, one message) and the rows' ids (``row_ids``). The prediction log's and a
shadow's sinks live beside the doors' shared service (app.predict.service).

``X`` is the request's own encoded rows (2-D float64, finite, the model's width: the caller
checked it): it is scaled in place.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.config import Settings
from app.core.logs import request_id_var
from app.core.problems import invalid, too_large
from app.models.decisions import Decision
from app.serving.explaining import RawExplanation, raw_contributions
from app.serving.model import ServedModel
from solver import label_margins


@dataclass(frozen=True)
class Scores:
    """One batch's answers, as arrays aligned with its rows."""

    index: np.ndarray  # (n,) the label's index into ``classes`` (calibrated: most probable)
    decision: np.ndarray  # (n,) binary f(x), positive for classes[1]; (n, k) one-vs-rest
    probabilities: np.ndarray | None  # (n, k) per class, when the model is calibrated
    contributions: RawExplanation | None  # per row and raw input column, when asked
    clipped: np.ndarray  # (n,) bool: a feature fell outside the training range
    scaled: Any  # the rows as the estimator saw them (scaled, clipped)
    classes: list[Any]  # the model's classes as JSON values
    rule: Decision  # the decision rule that made the labels (app.models.decisions)

    def rule_json(self) -> dict[str, Any]:
        """The answer's ``decision_rule``: the rule's name, source and parameters."""
        return self.rule.as_json(self.classes)

    @property
    def n(self) -> int:
        return int(self.index.shape[0])

    @property
    def n_clipped(self) -> int:
        """How many rows had a feature outside the training range (clipped to it)."""
        return int(self.clipped.sum())

    def labels(self) -> list[Any]:
        """The predicted labels as JSON values."""
        classes = self.classes
        return [classes[i] for i in self.index.tolist()]

    def own_decision(self) -> np.ndarray:
        """(n,): binary f(x); multi-class the predicted class's score."""
        if self.decision.ndim == 1:
            return self.decision
        return self.decision[np.arange(self.n), self.index]

    def margin(self) -> np.ndarray:
        """(n,) each row's margin for the label answered: binary y·f(x) (y = +1 for
        classes[1], -1 for classes[0]), multi-class f_label - max_{j != label} f_j, as
        /models/{id}/margins and the estimator's ``margin_vector`` compute it for true labels
        (``solver.label_margins``, the one formula).
        Positive when the decision values agree with the label, negative where a decision
        rule chose against them; its size is the row's distance to the decision boundary."""
        return label_margins(self.decision, self.index)

    def own_probability(self) -> np.ndarray | None:
        """(n,) the predicted label's probability, when the model is calibrated."""
        if self.probabilities is None:
            return None
        return self.probabilities[np.arange(self.n), self.index]


def class_values(loaded: ServedModel) -> list[Any]:
    """The model's classes as JSON values (computed once per served model)."""
    return loaded.class_values


def score(
    loaded: ServedModel, X: Any, *, explain: bool = False, rule: Decision | None = None
) -> Scores:
    """The model's answers for X (see the module's docstring): labels from the decision values
    (``est.predict`` would compute them, for kernel models the costly part, a second time) by
    the decision ``rule`` (default: the stored model's, ``ServedModel.decision_rule``) applied
    to the probabilities it answers with — argmax unless a rule says otherwise, so ``label`` and
    ``probabilities`` never contradict each other; an uncalibrated model's decision sign."""
    decided = loaded.decide(X, rule)  # (the one pipeline: app.serving.model)
    Xs, index = decided.scaled, decided.index
    # (explaining's cost is bounded by the caller first: app.serving.explaining)
    contributions = raw_contributions(loaded, Xs, index) if explain else None
    return Scores(
        index=index,
        decision=decided.decision,
        probabilities=decided.probabilities,
        contributions=contributions,
        clipped=decided.clipped,
        scaled=Xs,
        classes=class_values(loaded),
        rule=decided.rule,
    )


def records(scores: Scores, ids: list[Any]) -> list[dict[str, Any]]:
    """Each row's answer as a record (/predict's and invocations' ``predictions``), built
    column-wise from the core's arrays."""
    label_of = scores.labels()
    clip_of = scores.clipped.tolist()
    own = scores.own_decision().tolist()
    rows = scores.decision.tolist() if scores.decision.ndim == 2 else [None] * scores.n
    columns = [ids, clip_of, label_of, own, rows, scores.margin().tolist()]
    keys = ["id", "clipped", "label", "decision_value", "decision_values", "margin"]
    keys += ["probability", "probabilities"]
    probability = scores.own_probability()
    if probability is None:  # (an uncalibrated model: null, the answer's shape the same)
        columns += [[None] * scores.n] * 2
    else:
        assert scores.probabilities is not None
        classes = [str(c) for c in scores.classes]
        columns += [
            probability.tolist(),
            [dict(zip(classes, p, strict=True)) for p in scores.probabilities.tolist()],
        ]
    if scores.contributions is not None:
        columns.append(scores.contributions.rows())
        keys.append("explanation")
    return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]


def check_rows(n: int, settings: Settings, field: str) -> None:
    """The row limit of every door: 413 naming ``field`` when a request has more rows than
    MSVMAV_MAX_PREDICT_INSTANCES (checked before anything is allocated for them)."""
    if n > settings.max_predict_instances:
        raise too_large(
            f"{n} rows; at most {settings.max_predict_instances} per request "
            "(MSVMAV_MAX_PREDICT_INSTANCES)",
            field=field,
        )


def row_ids(ids: list[Any] | None, n: int, loc: list[str | int]) -> list[Any]:
    """The client's ids (one per row, 422 naming ``loc`` otherwise), or
    ``"{request_id}:{row}"``."""
    if ids is not None:
        if len(ids) != n:
            raise invalid(loc, f"{len(ids)} ids for {n} rows; give one per row")
        return ids
    prefix = f"{request_id_var.get() or uuid.uuid4().hex}:"
    return [prefix + str(i) for i in range(n)]
