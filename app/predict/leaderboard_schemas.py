"""Request and response bodies of the leaderboard (app.predict.leaderboard): models side by side
on the hold-out rows they share."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.ids import DbId
from app.predict.threshold_schemas import Cost

#: The metrics a leaderboard ranks by (each model has all of them, or null with a reason).
MetricName = Literal[
    "accuracy", "balanced_accuracy", "roc_auc", "pr_auc", "log_loss", "ece", "expected_cost"
]
#: At most this many models on one leaderboard (each is scored on the shared rows).
MAX_MODELS = 20
DEFAULT_MODELS = 10

COST_FP_DOC = (
    "Binary models: the cost of a false positive (labelling a row `classes[1]`, the positive "
    "class, when it is `classes[0]`); give cost_fp and cost_fn together"
)
COST_FN_DOC = (
    "Binary models: the cost of a false negative (`classes[0]` for a `classes[1]` row); give "
    "cost_fp and cost_fn together"
)
COST_MATRIX_DOC = (
    "Any number of classes: k × k costs, row = true class, column = served label, both in the "
    "order of the models' `classes`; instead of `cost_fp`/`cost_fn`"
)
METRIC_DOC = (
    "The metric the best model is chosen by: higher is better for accuracy, balanced_accuracy, "
    "roc_auc and pr_auc, lower for log_loss, ece and expected_cost (which needs a cost rule)"
)


class LeaderboardRequest(BaseModel):
    """Which models to compare (a list of references, or a dataset's), by what, at what cost."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    models: list[str] | None = Field(
        None,
        min_length=1,
        max_length=MAX_MODELS,
        description=f"Up to {MAX_MODELS} stored models' ids or registry references "
        "(`name@alias`, `name/version`, `name`), each at most once; or give `dataset_id`",
        examples=[["wdbc@production", "7"]],
    )
    dataset_id: DbId | None = Field(
        None, description="The newest `limit` models trained on this dataset (or give `models`)"
    )
    limit: int = Field(
        DEFAULT_MODELS, ge=1, le=MAX_MODELS,
        description="With `dataset_id`: how many of its newest models",
    )
    metric: MetricName = Field("roc_auc", description=METRIC_DOC)
    cost_fp: Cost | None = Field(None, description=COST_FP_DOC)
    cost_fn: Cost | None = Field(None, description=COST_FN_DOC)
    cost_matrix: list[list[Cost]] | None = Field(
        None, max_length=100, description=COST_MATRIX_DOC + "; square, one row and column "
        "per class of the models compared (else 422: the matrix must be k × k)",
    )


class CostRule(BaseModel):
    """The cost rule the expected cost is computed with."""

    labels: list[Any] = Field(description="The classes, in the order of the matrix")
    matrix: list[list[float]] = Field(description="Cost of (true class row, served label column)")
    positive_class: Any | None = Field(
        None, description="Binary rules given as cost_fp/cost_fn: the positive class, classes[1]"
    )


class LeaderboardEntry(BaseModel):
    """One model on the shared rows: each metric as sklearn.metrics computes it, or null with
    the reason in `notes`."""

    model_config = ConfigDict(protected_namespaces=())

    model_id: int
    reference: str | None = Field(description="The reference as given (null by dataset)")
    model: str | None = Field(description="The registered model the reference named")
    version: int | None
    alias: str | None
    algorithm: str
    calibration: str = Field(description="`sigmoid`, `isotonic` or `none` (no probabilities)")
    created_at: datetime
    n_holdout: int = Field(description="Rows of the model's own hold-out")
    decision_rule: dict[str, Any] | None = Field(
        None, description="The rule that made the labels measured (as /predict's answer says "
        "it: `name`, `source`, `rule`): the alias's rule for a `name@alias` reference, else "
        "the model's, else argmax (the decision value's sign without probabilities)")
    rank: int = Field(description="1 = best by `metric` (ties share a rank; null metric: last)")
    best: bool = Field(description="Best by `metric` (every model tied for best is)")
    accuracy: float | None
    balanced_accuracy: float | None
    roc_auc: float | None = Field(description="Binary: of classes[1]; multi-class: the macro "
                                  "mean of one-vs-rest AUCs (from the decision values)")
    pr_auc: float | None = Field(description="Average precision, as roc_auc")
    log_loss: float | None = Field(description="Of the served probabilities (calibrated only)")
    ece: float | None = Field(description="Top-label expected calibration error, 10 bins "
                              "(calibrated only)")
    expected_cost: float | None = Field(description="Mean cost per row of the served labels "
                                        "under `cost` (null without a cost rule)")
    expected_cost_interval: list[float] | None = Field(
        None, min_length=2, max_length=2,
        description="`expected_cost`'s 95 % interval [low, high]: scipy's bootstrap (BCa, "
        "2,000 resamples, seed 0) of the mean cost per row, as POST /models/{ref}/threshold's "
        "hold-out interval (null without a cost rule)")
    notes: dict[str, str] = Field(description="Why a metric is null, by metric")


class Excluded(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    model_id: int
    reason: str


class LeaderboardOut(BaseModel):
    """The models side by side on the hold-out rows every one of them kept out of training."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": 1,
                    "metric": "roc_auc",
                    "higher_is_better": True,
                    "comparable": True,
                    "reason": None,
                    "n_rows": 114,
                    "cost": None,
                    "best": [2],
                    "models": ["…"],
                    "excluded": [],
                    "n_models": 2,
                    "truncated": False,
                }
            ]
        }
    )

    dataset_id: int | None = Field(description="The dataset whose rows were compared on")
    metric: MetricName
    higher_is_better: bool
    comparable: bool = Field(description="False: the models cannot be compared on one "
                             "hold-out (`reason` says why); `models` is then empty")
    reason: str | None
    n_rows: int = Field(description="Rows compared on: those in every model's hold-out")
    cost: CostRule | None
    best: list[int] = Field(description="The ids of the best models by `metric` (ties: all)")
    models: list[LeaderboardEntry] = Field(description="Best first (by `rank`)")
    excluded: list[Excluded] = Field(description="Models left out, each with the reason (e.g. "
                                     "no hold-out kept)")
    n_models: int = Field(description="Models asked about: compared, or in `excluded`")
    truncated: bool = Field(description="By dataset: it has more models than `limit`; the "
                            "newest `limit` were taken")
