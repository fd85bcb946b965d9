"""The shapes of the service's answers, as TypedDicts (the JSON as the service sends it)."""

from __future__ import annotations

from typing import Any, TypedDict


class Dataset(TypedDict, total=False):
    id: int
    name: str
    format: str
    n_rows: int
    n_features: int
    feature_names: list[str]
    classes: list[Any]
    class_counts: list[int]


class JobInfo(TypedDict, total=False):
    id: int
    kind: str
    status: str  # queued, running, succeeded, failed, cancelled
    progress: float  # 0-1
    message: str
    model_id: int | None
    result: dict[str, Any] | None
    error: str | None


class ModelInfo(TypedDict, total=False):
    id: int
    job_id: int
    dataset_id: int | None
    algorithm: str
    params: dict[str, Any]
    classes: list[Any]
    n_features: int
    feature_names: list[str]
    holdout_accuracy: float | None
    weights: dict[str, Any] | None


class Prediction(TypedDict):
    label: Any
    decision_value: float  # binary: f(x); multi-class: the predicted class's score
    decision_values: list[float] | None  # multi-class: one per class


class PredictResult(TypedDict, total=False):
    model_id: int
    model: str | None  # the registered model, for a reference
    version: int | None
    alias: str | None
    classes: list[Any]
    n: int
    predictions: list[Prediction]
    accuracy: float | None  # with true labels
    margins: dict[str, Any] | None  # with true labels


class Margins(TypedDict, total=False):
    model_id: int
    source: str
    dataset_id: int | None
    n: int
    statistics: dict[str, Any]


class RegisteredModel(TypedDict, total=False):
    name: str
    description: str
    tags: dict[str, str]
    versions: list[dict[str, Any]]
    aliases: dict[str, int]


class Page(TypedDict):
    items: list[dict[str, Any]]
    next_cursor: str | None
