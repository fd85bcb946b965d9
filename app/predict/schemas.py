"""Request and response bodies of /predict."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from app.core.ids import DbId
from app.monitoring.schemas import PredictionId, PredictionIds
from app.registry.references import BARE_NAME

# A row is a list or a record. Declared as Any and checked by the row encoder (which names the
# row: "rows[3] must be a list of values or an object keyed by column name"): validating the
# union row by row copies every row and cost half a second per 100,000 rows.
Row = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [
                {"items": {}, "type": "array"},
                {"additionalProperties": True, "type": "object"},
            ]
        }
    ),
]

# The ids of /predict/file, sent as a JSON array in a form field; the text IDS_ADAPTER takes,
# stated in the document (a JSON array of strings of 1-128 characters and integers, or blank).
# The strings are a subset: no escape other than the two-character ones (no \\uXXXX).
_WS = "[ \\t\\n\\r]*"
_ID_TEXT = '"(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]){1,128}"'
_ID_INTEGER = "-?(?:0|[1-9][0-9]{0,17})"
_ID = f"(?:{_ID_TEXT}|{_ID_INTEGER})"
IDS_TEXT_PATTERN = f"^{_WS}(?:\\[{_WS}(?:{_ID}{_WS}(?:,{_WS}{_ID}{_WS})*)?\\]{_WS})?$"
# The ids of /predict/file, sent as a JSON array in a form field.
IDS_ADAPTER: TypeAdapter[list[PredictionId]] = TypeAdapter(
    PredictionIds, config=ConfigDict(strict=True)
)

# Examples fitting the README's first model (model 1, trained on examples/wdbc.arff): its first
# row (class 2, malignant), its 53rd data row (class 1, benign), and its column names.
_MALIGNANT = (
    "17.99 10.38 122.8 1001 0.1184 0.2776 0.3001 0.1471 0.2419 0.07871 1.095 0.9053 "
    "8.589 153.4 0.006399 0.04904 0.05373 0.01587 0.03003 0.006193 25.38 17.33 184.6 2019 "
    "0.1622 0.6656 0.7119 0.2654 0.4601 0.1189"
)
_BENIGN = (
    "13.54 14.36 87.46 566.3 0.09779 0.08129 0.06664 0.04781 0.1885 0.05766 0.2699 "
    "0.7886 2.058 23.56 0.008462 0.0146 0.02387 0.01315 0.0198 0.0023 15.11 19.26 99.7 711.2 "
    "0.144 0.1773 0.239 0.1288 0.2977 0.07259"
)
WDBC_MALIGNANT = [float(v) for v in _MALIGNANT.split()]
WDBC_BENIGN = [float(v) for v in _BENIGN.split()]
WDBC_COLUMNS = [f"V{j}" for j in range(1, 31)]


class PredictRequest(BaseModel):
    """Rows to classify, as raw values like those of the uploaded file (categories as text),
    either as lists in feature order or as records keyed by column name."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {"model_id": 1, "instances": [WDBC_MALIGNANT, WDBC_BENIGN], "labels": [2, 1]},
                {"model_id": 1, "instances": [dict(zip(WDBC_COLUMNS, WDBC_BENIGN, strict=True))]},
            ]
        },
    )

    model_id: DbId | None = Field(None, description="Stored model to use (or give `model`)")
    model: str | None = Field(
        None,
        max_length=300,
        description="Registered model to use instead of `model_id`: `name@alias` "
        f"(`wdbc@production`), `name/version` (`wdbc/2`) or {BARE_NAME}",
        examples=["wdbc@production"],
    )
    instances: list[Row] = Field(
        min_length=1, description="Rows: lists in column order, or records by column name"
    )
    labels: list[Any] | None = Field(
        None, description="True labels, one per row: adds accuracy and margin statistics"
    )
    ids: PredictionIds | None = Field(
        None,
        description="Your id of each row (string of at most 128 characters, or integer), "
        "echoed as each prediction's `id` (and used by POST /feedback); without them a row's "
        'id is `"{X-Request-ID}:{row}"`',
    )
    explain: bool = Field(
        False,
        description="Add each row's `explanation`: one contribution per raw input column "
        "(a categorical column's one-hot columns summed) and the decision value at the "
        "stated baseline (the answer's `explanation`), which they add up to; refused (422 "
        "naming `explain`) when its cost exceeds MSVMAV_MAX_EXPLAIN_WORK",
    )
    rule: Literal["argmax"] | None = Field(
        None, description="This request's decision rule instead of the stored one: `argmax` "
        "labels each row with its most probable class (a calibrated model)")
    threshold: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = Field(
        None, description="This request's decision rule instead of the stored one: classes[1] "
        "when its probability is at least `threshold` (a calibrated two-class model)")


class RowExplanation(BaseModel):
    baseline_decision: float = Field(
        description="The decision value at the baseline (multi-class: of the predicted class)"
    )
    contributions: dict[str, float] = Field(
        description="Per raw input column, its contribution: `baseline_decision` plus their "
        "sum is the row's `decision_value` (within 1e-6)"
    )


class ExplanationSummary(BaseModel):
    method: str = Field(
        description="`linear` (exactly w_j (x_j - baseline_j) in the scaled space), "
        "`integrated-gradients-rbf` (closed form along the straight path from the "
        "baseline) or `integrated-gradients-poly` (exact Gauss-Legendre nodes)"
    )
    baseline: dict[str, float] = Field(
        description="The baseline row per encoded feature, in raw units: the training part's "
        "column means (a category's value is its share)"
    )
    completeness_error: float = Field(
        description="The largest |baseline_decision + sum(contributions) - decision_value| "
        "measured over the rows"
    )


class Prediction(BaseModel):
    id: str | int = Field(
        description='The row\'s id: the one given in `ids`, else `"{X-Request-ID}:{row}"`'
    )
    clipped: bool = Field(
        description="Whether any of the row's features fell outside the training range (and "
        "was clipped to it by the min-max scaling)"
    )
    label: Any = Field(description="Predicted class, in the original label values")
    decision_value: float = Field(
        description="Binary: f(x), positive for classes[1]; multi-class: the predicted class's "
        "one-vs-rest score"
    )
    decision_values: list[float] | None = Field(
        None, description="Multi-class only: one score per class, aligned with `classes`"
    )
    margin: float = Field(
        description="The row's margin for the predicted label: binary y·f(x) (y = +1 for "
        "classes[1], -1 for classes[0]); multi-class f_label − max of the other classes' "
        "scores. Positive when the decision values agree with the label (negative where a "
        "decision rule chose against them); its size is the distance to the decision boundary"
    )
    probability: float | None = Field(
        None,
        description="Calibrated models (the detail's `calibration` not `none`): the "
        "probability of the predicted label",
    )
    probabilities: dict[str, float] | None = Field(
        None,
        description="Calibrated models: the probability of each class, keyed by the class "
        "as text, in the order of `classes`",
    )
    explanation: RowExplanation | None = Field(
        None, description="With `explain: true`: why this row got its decision value"
    )


class PredictResponse(BaseModel):
    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "model_id": 2,
                    "model": "wdbc",
                    "version": 2,
                    "alias": "production",
                    "classes": [1, 2],
                    "n": 1,
                    "predictions": [
                        {"id": "a1:0", "clipped": False, "label": 2, "decision_value": 1.73,
                         "margin": 1.73}
                    ],
                    "accuracy": 1.0,
                    "margins": {"n": 1, "mean": 1.73, "…": "…"},
                }
            ]
        },
    )

    model_id: int = Field(description="The stored model that answered (a reference resolved)")
    model: str | None = Field(None, description="The registered model, for a `model` reference")
    version: int | None = Field(None, description="Its version that answered")
    alias: str | None = Field(None, description="The alias that chose it, if any")
    arm: Literal["primary", "canary"] | None = Field(
        None, description="When the alias has a canary: which of its two versions answered "
        "(`version` is that one; routed by the `X-Msvmav-Route-Key` header, else the first "
        "row's id, else at random)")
    classes: list[Any]
    n: int
    n_clipped: int = Field(0, description="How many rows had a feature outside the training "
                           "range (each one's `clipped`): a drift hint per answer")
    predictions: list[Prediction]
    accuracy: float | None = Field(None, description="With true labels: fraction correct")
    decision_rule: dict[str, Any] | None = Field(
        None, description="The rule that made the labels: `name`, `source` (`request`, "
        "`alias`, `model` or `default`) and `rule` (null: the decision value's sign, a model "
        "without probabilities; see POST /models/{ref}/threshold)")
    margins: dict[str, Any] | None = Field(
        None, description="With true labels: margin statistics of this batch"
    )
    explanation: ExplanationSummary | None = Field(
        None,
        description="With `explain: true`: the method and baseline of the rows' explanations",
    )
    skipped: dict[str, Any] | None = Field(
        None,
        description='/predict/file with on_error="skip": `n`, the rows left out, and `errors`, '
        "the first 100 of them (`row` 0-based, `line`, `column`, `reason`)",
    )


class ExplainRequest(BaseModel):
    """Rows to explain, as /predict takes them."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"instances": [WDBC_MALIGNANT]}]},
    )

    instances: list[Row] = Field(
        min_length=1, description="Rows: lists in column order, or records by column name"
    )
    ids: PredictionIds | None = Field(None, description="Your id of each row, as /predict's `ids`")


_EVALUATION_EXAMPLE = {
    "model_id": 1, "model": None, "version": None, "alias": None, "source": "dataset",
    "dataset_id": 1, "n": 114, "rows": "holdout",
    "row_indices": list(range(0, 570, 5)),  # the 114 hold-out rows of a 569-row dataset
    "metrics": {
        "n": 114, "accuracy": 0.9649, "balanced_accuracy": 0.9623,
        "majority_baseline": 0.6316, "majority_class": 1, "beats_baseline": True,
        "roc_auc": 0.9934, "pr_auc": 0.9901, "log_loss": 0.0952, "brier": 0.0281,
        "ece": 0.0311,
        "confusion_matrix": {"labels": [1, 2], "matrix": [[70, 2], [2, 40]]},
        "per_class": [
            {"label": 1, "precision": 0.9722, "recall": 0.9722, "f1": 0.9722, "support": 72},
            {"label": 2, "precision": 0.9524, "recall": 0.9524, "f1": 0.9524, "support": 42},
        ],
    },
    "curves": {
        "roc": [{"label": 2, "fpr": [0.0, 0.0, 1.0], "tpr": [0.0, 0.5, 1.0],
                 "thresholds": [None, 0.71, -1.32]}],
        "pr": [{"label": 2, "precision": [0.37, 1.0, 1.0], "recall": [1.0, 0.5, 0.0]}],
        "reliability": [{"label": 2, "mean_predicted": [0.04, 0.93],
                         "fraction_positive": [0.03, 0.95], "count": [70, 44]}],
    },
    "importance": None,
}


class EvaluationOut(BaseModel):
    model_config = ConfigDict(
        protected_namespaces=(), json_schema_extra={"examples": [_EVALUATION_EXAMPLE]}
    )

    model_id: int = Field(description="The stored model evaluated (a reference resolved)")
    model: str | None = Field(None, description="The registered model, for a name reference")
    version: int | None = None
    alias: str | None = None
    source: str = Field(description="`dataset` or `file`")
    dataset_id: int | None = None
    n: int = Field(description="Rows evaluated")
    rows: Literal["holdout", "all"] = Field(
        "all",
        description="Which rows were scored: `holdout` (the model's own dataset: only the "
        "rows it did not train on, listed in `row_indices`) or `all` (every row given)",
    )
    row_indices: list[int] | None = Field(
        None, description="With `rows` `holdout`: the dataset's rows scored (0-based, sorted)"
    )
    metrics: dict[str, Any] = Field(
        description="n, accuracy, balanced_accuracy, majority_baseline, majority_class, "
        "beats_baseline, roc_auc, pr_auc (binary: a number; multi-class: macro and "
        "per_class), log_loss, brier, ece (null without probabilities), confusion_matrix "
        "(labels, matrix: rows true, columns predicted), per_class (label, precision, recall, "
        "f1, support)"
    )
    curves: dict[str, Any] = Field(
        description="roc (label, fpr, tpr, thresholds; the first threshold null for +inf), pr "
        "(label, precision, recall), reliability (label, mean_predicted, fraction_positive, "
        "count: the non-empty bins of 10); one per class one-vs-rest, only classes[1] for two"
    )
    importance: dict[str, Any] | None = Field(
        None,
        description="With `importance`: the permutation importance per raw input column "
        "(`columns`: {column: {mean, std}}, the accuracy lost when it is shuffled, over "
        "`n_repeats` seeded shuffles; a categorical column's one-hot columns shuffled together)",
    )
