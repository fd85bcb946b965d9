"""A model's evaluation on labelled rows: the scoring core's answers (app.serving.scoring) against
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
from app.models.decisions import Decision
from app.models.service import match_labels
from app.serving.explaining import column_groups
from app.serving.model import ServedModel
from app.serving.scoring import Scores, score
from solver import curves, evaluate, explain_work, permutation_importance

# Shuffles per raw column of the permutation importance.
IMPORTANCE_REPEATS = 5

# A class whose hold-out rows the model labels correctly fewer than this fraction of the time
# (its recall) is named in the model's warnings, whatever the model's accuracy.
MIN_RECALL = 0.1


def metrics_of(
    classes: np.ndarray, y_true: np.ndarray, index: np.ndarray, decision: np.ndarray, proba: Any
) -> dict[str, Any]:
    """``solver.evaluation.evaluate`` of the predictions ``classes[index]`` (JSON values)."""
    return jsonable(evaluate(y_true, classes[index], decision, proba, classes))


def _against_baseline(evaluation: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(metric, the model's value, the majority-class baseline's) for accuracy, balanced
    accuracy (a constant prediction's is 1 / the number of classes among the true labels) and
    ROC AUC (a constant score's is 1/2; multi-class: the macro mean), where defined."""
    present = sum(1 for c in evaluation.get("per_class") or () if c["support"] > 0)
    auc = evaluation.get("roc_auc")
    auc = auc.get("macro") if isinstance(auc, dict) else auc
    rows = [("accuracy", evaluation.get("accuracy"), evaluation.get("majority_baseline")),
            ("balanced accuracy", evaluation.get("balanced_accuracy"),
             1.0 / present if present else None),
            ("ROC AUC", auc, 0.5)]  # fmt: skip
    return [(name, v, b) for name, v, b in rows if v is not None and b is not None]


def _listed(rows: list[tuple[str, float, float]]) -> str:
    return ", ".join(f"{name} {value:.4f} against {base:.4f}" for name, value, base in rows)


def _baseline(evaluation: dict[str, Any]) -> str | None:
    """The warning of a model that does not beat the majority-class baseline on its hold-out
    part on accuracy, balanced accuracy or ROC AUC (each where defined), naming the metrics it
    does not beat and those it does; None when it beats it on every one."""
    rows = _against_baseline(evaluation)
    worse = [r for r in rows if not r[1] > r[2]]
    if not worse:
        return None
    better = [r for r in rows if r[1] > r[2]]
    text = (f"the model does not beat the majority-class baseline (always predicting "
            f"{evaluation['majority_class']!r}) on {_part(evaluation)}: {_listed(worse)}")
    return text + (f"; it does beat it on {_listed(better)}" if better else "")


def _part(evaluation: dict[str, Any]) -> str:
    """The rows an evaluation is of, in words: the hold-out part, or (without one) the
    training rows out of fold."""
    if evaluation.get("source") == "cross-validated":
        return "its training rows out of fold (no hold-out)"
    return "its hold-out part"


def recall_warnings(evaluation: dict[str, Any] | None) -> list[str]:
    """One warning per class of the hold-out part whose recall is below MIN_RECALL: the
    classes the model almost never finds, whatever its accuracy."""
    if not evaluation:
        return []
    labels = evaluation["confusion_matrix"]["labels"]
    matrix = evaluation["confusion_matrix"]["matrix"]
    out = []
    for c in evaluation.get("per_class") or ():
        if c["support"] > 0 and c["recall"] < MIN_RECALL:
            j = labels.index(c["label"])
            out.append(f"the model almost never finds class {c['label']!r}: recall "
                       f"{c['recall']:.4f} on {_part(evaluation)} ({matrix[j][j]} of "
                       f"{c['support']} rows), below {MIN_RECALL}")
    return out


def holdout_warnings(evaluation: dict[str, Any] | None) -> list[str]:
    """Every warning of a model's hold-out evaluation, on every model whatever its accuracy:
    the majority-class baseline's (``_baseline``), then one per class it almost never finds
    (``recall_warnings``)."""
    if not evaluation:
        return []
    warning = _baseline(evaluation)
    return ([] if warning is None else [warning]) + recall_warnings(evaluation)


def baseline_warning(evaluation: dict[str, Any] | None) -> str | None:
    """``holdout_warnings`` as the one text the training pipeline adds to a model's warnings
    (and its job's message), joined by "; "; None without any."""
    return "; ".join(holdout_warnings(evaluation)) or None


def check_importance_cost(
    loaded: ServedModel, n_rows: int, settings: Settings, loc: list[str | int]
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


def importance(loaded: ServedModel, Xs: Any, y_true: np.ndarray) -> dict[str, Any]:
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
    loaded: ServedModel,
    X: Any,
    labels: list[Any],
    loc: list[str | int],
    *,
    with_importance: bool = False,
    rule: Decision | None = None,
) -> dict[str, Any]:
    """The metrics and curves (and, asked, the permutation importance) of the model on encoded
    rows X (scaled in place) with their true ``labels`` (422 naming ``loc`` for a label that is
    not one of the model's classes), of the labels its decision ``rule`` serves (default the
    model's own: app.serving.scoring)."""
    classes = loaded.estimator.classes_
    y_true = classes[match_labels(classes, labels, loc)]
    scores: Scores = score(loaded, X, rule=rule)
    out = {
        "metrics": metrics_of(classes, y_true, scores.index, scores.decision, scores.probabilities),
        "curves": jsonable(curves(y_true, scores.decision, scores.probabilities, classes)),
        "importance": importance(loaded, scores.scaled, y_true) if with_importance else None,
    }
    return out
