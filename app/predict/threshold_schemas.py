"""Bodies of ``POST /models/{ref}/threshold``: the objective a decision rule is fitted to."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from solver import MAX_COST_CLASSES

#: The largest cost: costs only matter relative to each other, and sums of n costs near
#: float64's limit overflow (1e308 each answered a meaningless threshold with inf costs).
MAX_COST = 1e12
Cost = Annotated[float, Field(ge=0, le=MAX_COST, allow_inf_nan=False)]


class Objective(BaseModel):
    """Exactly one of: ``cost_fp`` and ``cost_fn`` (two classes), ``cost_matrix``, or
    ``target`` with ``value``."""

    model_config = ConfigDict(extra="forbid")

    cost_fp: Cost | None = Field(None, description="Cost of a false positive (two classes)",
                                 examples=[1.0])
    cost_fn: Cost | None = Field(None, description="Cost of a false negative (two classes)",
                                 examples=[5.0])
    cost_matrix: (
        Annotated[list[Annotated[list[Cost], Field(max_length=MAX_COST_CLASSES)]],
                  Field(max_length=MAX_COST_CLASSES)] | None
    ) = Field(None, description="C[i][j]: the cost of predicting class j (in `classes` order) "
              "when the true class is i; the rule is the Bayes rule argmin_j sum_i P_i C[i][j]")
    target: Literal["precision", "recall", "fpr"] | None = Field(
        None, description="A rate to reach for the `positive` class: precision or recall at "
        "least `value`, or false-positive rate at most `value`")
    value: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    positive: Any = Field(None, description="The positive class (a label of the model; "
                          "default: classes[1] of a two-class model)", examples=["bad"])


class ThresholdRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    objective: Objective
    store: bool = Field(True, description="Store the fitted rule: on the registry alias when "
                        "the reference names one (`name@alias`), else on the stored model")


_ANSWER_EXAMPLE = {
    "model_id": 1, "model": "credit", "version": 1, "alias": "production",
    "stored_on": "alias", "objective": {"cost_fp": 1.0, "cost_fn": 5.0, "positive": 1},
    "rule": {"kind": "threshold", "class_index": 1, "threshold": 0.18,
             "objective": {"cost_fp": 1.0, "cost_fn": 5.0, "positive": 1}},
    "decision_rule": "threshold P(bad) >= 0.18", "threshold": 0.18,
    "oof": {"measure": "mean cost", "n": 800, "value": 0.52, "interval": [0.47, 0.58]},
    "holdout": {"measure": "mean cost", "n": 200, "value": 0.55, "interval": [0.45, 0.66]},
    "holdout_argmax": {"measure": "mean cost", "n": 200, "value": 0.93,
                       "interval": [0.76, 1.1]},
    "curve": {"threshold": [0.0, 0.01, "…"], "chosen": 0.18, "measure": "mean cost",
              "oof": [0.7, 0.69, "…"], "holdout": [0.7, 0.7, "…"]},
}


class Measured(BaseModel):
    measure: str = Field(description="`mean cost` (per row), or the target rate")
    n: int = Field(description="Rows measured on")
    value: float | None
    interval: list[float] | None = Field(
        description="95 %: bootstrap (BCa) of the mean cost; Wilson for a rate")


class ThresholdAnswer(BaseModel):
    model_config = ConfigDict(protected_namespaces=(),
                              json_schema_extra={"examples": [_ANSWER_EXAMPLE]})

    model_id: int
    model: str | None = None
    version: int | None = None
    alias: str | None = None
    stored_on: Literal["alias", "model"] | None = Field(
        description="Where the rule was stored (null: `store` false)")
    objective: dict[str, Any]
    rule: dict[str, Any] = Field(description="The fitted rule (solver.decision), as stored")
    decision_rule: str = Field(description="Its name, as every answer labelled by it says")
    threshold: float | None = Field(description="The threshold (null: a cost matrix's Bayes "
                                    "rule)")
    oof: Measured = Field(description="The objective on the out-of-fold rows it was fitted on")
    holdout: Measured | None = Field(description="On the model's hold-out part (null: none)")
    holdout_argmax: Measured | None = Field(description="The argmax rule's, on the hold-out")
    curve: dict[str, Any] | None = Field(
        description="The objective against the threshold: `threshold` (a grid over [0, 1] "
        "and the chosen one), `oof` and `holdout` values at each")
