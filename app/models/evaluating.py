"""A model's evaluation on labelled rows: the scoring core's answers (app.models.scoring) against
the true labels, as ``solver.evaluation`` computes them (every number with sklearn.metrics), and
its ROC, precision-recall and reliability curves (as JSON, or drawn: app.models.figures).

The same metrics are what a fit keeps for its hold-out part (app.training.pipeline), so
``POST /models/{ref}/evaluate`` on the hold-out rows gives the detail's ``evaluation``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.models.scoring import Scores, score
from app.models.service import LoadedModel, match_labels
from solver.evaluation import curves, evaluate
from solver.jsonable import jsonable

BASELINE_WARNING = (
    "the model does not beat the majority-class baseline on its hold-out part: accuracy "
    "{accuracy:.4f} against {baseline:.4f} for always predicting {majority!r}"
)


def metrics_of(
    classes: np.ndarray, y_true: np.ndarray, index: np.ndarray, decision: np.ndarray, proba: Any
) -> dict[str, Any]:
    """``solver.evaluation.evaluate`` of the predictions ``classes[index]`` (JSON values)."""
    return jsonable(evaluate(y_true, classes[index], decision, proba, classes))


def baseline_warning(evaluation: dict[str, Any] | None) -> str | None:
    """The warning a model gets when it does not beat the majority baseline, else None."""
    if not evaluation or evaluation.get("beats_baseline", True):
        return None
    return BASELINE_WARNING.format(
        accuracy=evaluation["accuracy"],
        baseline=evaluation["majority_baseline"],
        majority=evaluation["majority_class"],
    )


def evaluate_rows(
    loaded: LoadedModel, X: Any, labels: list[Any], loc: list[str | int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metrics and curves of the model on encoded rows X (scaled in place) with their true
    ``labels`` (422 naming ``loc`` for a label that is not one of the model's classes)."""
    classes = loaded.estimator.classes_
    y_true = classes[match_labels(classes, labels, loc)]
    scores: Scores = score(loaded, X)
    metrics = metrics_of(classes, y_true, scores.index, scores.decision, scores.probabilities)
    drawn = jsonable(curves(y_true, scores.decision, scores.probabilities, classes))
    return metrics, drawn
