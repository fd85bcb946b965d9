"""A model's evaluation on labelled rows: the scoring core's answers (app.models.scoring) against
the true labels, as ``solver.evaluation`` computes them (every number with sklearn.metrics), and
its ROC, precision-recall and reliability curves (as JSON, or drawn: app.models.figures).

The same metrics are what a fit keeps for its hold-out part (app.training.pipeline), so
``POST /models/{ref}/evaluate`` on the hold-out rows gives the detail's ``evaluation``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.core.config import Settings
from app.core.jsonable import jsonable
from app.core.problems import invalid
from app.models.explaining import column_groups
from app.models.scoring import Scores, score
from app.models.service import LoadedModel, match_labels
from solver.evaluation import curves, evaluate
from solver.explain import explain_work, permutation_importance

# Shuffles per raw column of the permutation importance.
IMPORTANCE_REPEATS = 5

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


def check_importance_cost(
    loaded: LoadedModel, n_rows: int, settings: Settings, loc: list[str | int]
) -> None:
    """422 naming ``loc`` when the permutation importance of ``n_rows`` rows (a decision pass
    per raw column and shuffle, each bounded by ``explain_work``) would exceed
    MSVMAV_MAX_EXPLAIN_WORK; checked before anything is computed."""
    columns, _ = column_groups(loaded)
    try:
        work = IMPORTANCE_REPEATS * len(columns) * explain_work(loaded.estimator, n_rows)
    except ValueError as exc:
        raise invalid(loc, f"model {loaded.id} has no per-feature importance: {exc}") from None
    if work > settings.max_explain_work:
        raise invalid(
            loc,
            f"the permutation importance of {n_rows} rows costs about {work:,} multiply-adds; "
            f"at most {settings.max_explain_work:,} per request (MSVMAV_MAX_EXPLAIN_WORK)",
        )


def importance(loaded: LoadedModel, Xs: Any, y_true: np.ndarray) -> dict[str, Any]:
    """Model-level permutation importance per raw input column on the scaled rows Xs: the
    drop in accuracy when the column (a categorical one's one-hot columns together) is
    shuffled across rows, over IMPORTANCE_REPEATS shuffles (seeded: 0)."""
    columns, G = column_groups(loaded)
    groups = [np.flatnonzero(G[:, j]).tolist() for j in range(len(columns))]
    singletons = all(len(g) == 1 for g in groups)
    result = permutation_importance(
        loaded.estimator,
        Xs,
        y_true,
        groups=None if singletons else groups,
        n_repeats=IMPORTANCE_REPEATS,
        random_state=0,
    )
    return jsonable(
        {
            "scoring": "accuracy",
            "n_repeats": IMPORTANCE_REPEATS,
            "columns": {
                c: {"mean": m, "std": s}
                for c, m, s in zip(
                    columns,
                    result["importances_mean"].tolist(),
                    result["importances_std"].tolist(),
                    strict=True,
                )
            },
        }
    )


def evaluate_rows(
    loaded: LoadedModel,
    X: Any,
    labels: list[Any],
    loc: list[str | int],
    *,
    with_importance: bool = False,
) -> dict[str, Any]:
    """The metrics and curves (and, asked, the permutation importance) of the model on encoded
    rows X (scaled in place) with their true ``labels`` (422 naming ``loc`` for a label that is
    not one of the model's classes)."""
    classes = loaded.estimator.classes_
    y_true = classes[match_labels(classes, labels, loc)]
    scores: Scores = score(loaded, X)
    out = {
        "metrics": metrics_of(classes, y_true, scores.index, scores.decision, scores.probabilities),
        "curves": jsonable(curves(y_true, scores.decision, scores.probabilities, classes)),
        "importance": importance(loaded, scores.scaled, y_true) if with_importance else None,
    }
    return out
