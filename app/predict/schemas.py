"""Request and response bodies of /predict."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

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


class PredictRequest(BaseModel):
    """Rows to classify, as raw values like those of the uploaded file (categories as text),
    either as lists in feature order or as records keyed by column name."""

    model_config = ConfigDict(
        extra="forbid",
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {"model_id": 3, "instances": [[17.99, 10.38, 122.8]], "labels": [2]},
                {"model_id": 5, "instances": [{"age": 41, "job": "admin.", "balance": 1270}]},
            ]
        },
    )

    model_id: int = Field(description="Model to use")
    instances: list[Row] = Field(
        min_length=1, description="Rows: lists in column order, or records by column name"
    )
    labels: list[Any] | None = Field(
        None, description="True labels, one per row: adds accuracy and margin statistics"
    )


class Prediction(BaseModel):
    label: Any = Field(description="Predicted class, in the original label values")
    decision_value: float = Field(
        description="Binary: f(x), positive for classes[1]; multi-class: the predicted class's "
        "one-vs-rest score"
    )
    decision_values: list[float] | None = Field(
        None, description="Multi-class only: one score per class, aligned with `classes`"
    )


class PredictResponse(BaseModel):
    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "model_id": 3,
                    "classes": [1, 2],
                    "n": 1,
                    "predictions": [{"label": 2, "decision_value": 1.73}],
                    "accuracy": 1.0,
                    "margins": {"n": 1, "mean": 1.73, "…": "…"},
                }
            ]
        },
    )

    model_id: int
    classes: list[Any]
    n: int
    predictions: list[Prediction]
    accuracy: float | None = Field(None, description="With true labels: fraction correct")
    margins: dict[str, Any] | None = Field(
        None, description="With true labels: margin statistics of this batch"
    )
