"""Per-row explanations for the scoring core: ``solver.explain.contributions`` on the rows as the
estimator sees them (scaled and clipped), summed back into the RAW input columns (a categorical
column's one-hot columns give one contribution), with the stated baseline.

For every row, ``baseline_decision + sum(contributions) == decision_value`` within 1e-6 (for
more than two classes: the predicted class's one-vs-rest score and its baseline). The baseline
is the training rows' column means (``feature_means_``, in the scaled space the model was fitted
in), stated in raw units per encoded feature. Explaining costs more than scoring: the cost
(``solver.explain.explain_work``: rows × the method's multiply-adds) is checked against
``MSVMAV_MAX_EXPLAIN_WORK`` before anything is computed (``check_explain_cost``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.config import Settings
from app.core.problems import invalid
from app.ingest import encoding_feature_names
from app.ingest.column_specs import feature_specs, spec_width
from app.serving.model import ServedModel
from solver import contributions, explain_work


@dataclass(frozen=True)
class RawExplanation:
    """Contributions per raw input column, for one batch of rows."""

    columns: list[str]  # the raw input columns, in training order
    values: np.ndarray  # (n, len(columns)): each column's contribution to the row's decision
    baseline_decision: np.ndarray  # (n,): the decision value at the baseline (the row's class)
    baseline: dict[str, float]  # the baseline per encoded feature, in raw units
    method: str  # solver.explain's: "linear", "integrated-gradients-rbf", ...
    completeness_error: float  # the largest |baseline + sum - decision| measured

    def rows(self) -> list[dict[str, Any]]:
        """Each row's ``{"baseline_decision", "contributions": {column: value}}``."""
        columns = self.columns
        return [
            {"baseline_decision": b, "contributions": dict(zip(columns, v, strict=True))}
            for b, v in zip(self.baseline_decision.tolist(), self.values.tolist(), strict=True)
        ]

    def summary(self) -> dict[str, Any]:
        """What every row shares: the method, the baseline, the measured completeness error."""
        return {
            "method": self.method,
            "baseline": self.baseline,
            "completeness_error": self.completeness_error,
        }


def column_groups(loaded: ServedModel) -> tuple[list[str], np.ndarray]:
    """The raw input columns and the (encoded features, columns) 0/1 matrix summing each
    column's encoded features (one per numeric column, one per category)."""
    cached = loaded.extras.get("column_groups")
    if cached is not None:
        return cached
    specs = feature_specs(loaded.encoding)
    names = [spec["name"] for spec in specs]
    widths = [spec_width(spec) for spec in specs]
    if sum(widths) != loaded.n_features:  # (an encoding without column specs: one per feature)
        names = [f"f{j}" for j in range(loaded.n_features)]
        widths = [1] * loaded.n_features
    G = np.zeros((loaded.n_features, len(names)))
    G[np.arange(loaded.n_features), np.repeat(np.arange(len(names)), widths)] = 1.0
    loaded.extras["column_groups"] = (names, G)
    return names, G


def check_explain_cost(
    loaded: ServedModel, n_rows: int, settings: Settings, loc: list[str | int]
) -> None:
    """422 naming ``loc`` when explaining ``n_rows`` rows would cost more than
    MSVMAV_MAX_EXPLAIN_WORK multiply-adds (checked before anything is computed), or when the
    model cannot be explained per feature."""
    try:
        work = explain_work(loaded.estimator, n_rows)
    except ValueError as exc:
        raise invalid(loc, f"model {loaded.id} cannot be explained: {exc}") from None
    limit = settings.max_explain_work
    if work > limit:
        raise invalid(
            loc,
            f"explaining {n_rows} rows with model {loaded.id} costs {work:,} multiply-adds; at "
            f"most {limit:,} per request (MSVMAV_MAX_EXPLAIN_WORK): send fewer rows",
        )


def _baseline_raw(loaded: ServedModel, baseline: np.ndarray) -> dict[str, float]:
    """The baseline (scaled space) per encoded feature, in the request's raw units."""
    raw = np.asarray(baseline, dtype=np.float64)
    scaling = loaded.scaling
    if scaling is not None:
        raw = scaling.data_min + raw / scaling.scale
    try:
        names = encoding_feature_names(loaded.encoding)
    except (KeyError, TypeError):
        names = []
    if len(names) != raw.size:
        names = [f"f{j}" for j in range(raw.size)]
    return dict(zip(names, raw.tolist(), strict=True))


def raw_contributions(loaded: ServedModel, Xs: Any, index: np.ndarray) -> RawExplanation:
    """The contributions of the rows ``Xs`` (scaled as the core scaled them) to the decision
    value each row answers (``index``: its predicted class), per raw input column."""
    exp = contributions(loaded.estimator, Xs)
    values = exp.values
    base = np.asarray(exp.baseline_decision, dtype=np.float64)
    n = values.shape[0]
    if values.ndim == 3:  # one-vs-rest: the predicted class's score
        values = values[np.arange(n), :, index]
        base = base[index]
    else:
        base = np.full(n, float(base))
    columns, G = column_groups(loaded)
    return RawExplanation(
        columns=columns,
        values=values @ G,
        baseline_decision=base,
        baseline=_baseline_raw(loaded, exp.baseline),
        method=exp.method,
        completeness_error=float(exp.completeness_error),
    )
