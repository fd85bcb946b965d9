"""What every door does the same way between its own decoding and the scoring core: raw rows
(lists in training column order, or records keyed by column name) or one numeric array encoded
with the served model's stored encoding and checked (finite, of the model's width: a 422 naming
the door's field and the row otherwise); the request's true labels as the model's classes; the
decision rule that labels the rows (the request's own, else its alias's, else the model's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from app.core.problems import ingest_problem, invalid
from app.ingest import IngestError
from app.models.decisions import Decision, RuleError, choose, override_rule
from app.models.service import match_labels
from app.serving.model import ServedModel
from app.serving.target import Target


def check_matrix(X: Any, model: Any, loc: list[str | int]) -> None:
    """422 naming ``loc`` (and the row) unless X has the model's width and finite values
    (``model``: anything with ``id`` and ``n_features``)."""
    if X.ndim != 2 or X.shape[1] != model.n_features:
        raise invalid(
            loc,
            f"rows encode to {X.shape[-1]} features; model {model.id} expects {model.n_features}",
        )
    values = X.data if sp.issparse(X) else np.asarray(X)
    bad = ~np.isfinite(values)
    if bad.any():
        if sp.issparse(X):
            row = int(np.searchsorted(X.indptr, np.flatnonzero(bad)[0], side="right") - 1)
        else:
            row = int(np.argwhere(bad)[0][0])
        raise invalid([*loc, row], f"row {row} has a missing, NaN or infinite value", row=row)


def encode_rows(model: ServedModel, rows: list[Any], loc: list[str | int]) -> Any:
    """Raw rows or records encoded with the model's stored encoding, checked."""
    try:
        X = model.encoder.transform_rows(rows)
    except IngestError as exc:
        where: list[str | int] = list(loc)
        if exc.row is not None:
            where.append(exc.row)
        raise ingest_problem(exc, where) from exc
    check_matrix(X, model, loc)
    return X


def encode_matrix(model: ServedModel, A: np.ndarray, loc: list[str | int]) -> Any:
    """Rows already one numeric array (n, k) (a protocol's tensor, a body's numbers), encoded
    as ``encode_rows`` encodes them, without a Python object per number when the model takes
    them as they are."""
    A = np.asarray(A, dtype=np.float64)
    if not A.flags.writeable:  # (a view of the request's bytes: the core scales in place)
        A = A.copy()
    X = model.encoder.transform_matrix(A) if np.isfinite(A).all() else None
    if X is None:  # not what this model takes as it is: the rows' path explains why
        return encode_rows(model, A.tolist(), loc)
    return X


def true_labels(
    model: ServedModel, labels: list[Any] | None, n: int, loc: list[str | int]
) -> np.ndarray | None:
    """The true labels as the model's classes (checked before anything is scored)."""
    if labels is None:
        return None
    if len(labels) != n:
        raise invalid(loc, f"{len(labels)} labels for {n} rows; give one per row")
    classes = model.estimator.classes_
    return classes[match_labels(classes, labels, loc)]


def decision_for(
    model: ServedModel,
    target: Target,
    rule: str | None = None,
    threshold: float | None = None,
    loc: list[str | int] | None = None,
) -> Decision:
    """The decision rule that labels a request's rows (app.models.decisions): its own
    override (``rule`` "argmax" or ``threshold``; 422 naming it under ``loc`` when the model
    cannot take it), else the rule of the alias its reference named, else the model's."""
    est = model.estimator
    try:
        override = override_rule(est.calibrated, len(est.classes_), rule, threshold)
    except RuleError as exc:
        raise invalid([*(loc or ["body"]), exc.field], exc.message) from None
    alias_rule = target.resolved.rule if target.resolved is not None else None
    return choose(est.calibrated, len(est.classes_), model.rule, alias_rule, override)
