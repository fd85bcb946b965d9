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
    calibration: str  # sigmoid, isotonic or none (no probabilities)
    converged: bool | None  # MSVMAv: the stopping rule met before max_iter
    last_relative_change: float | None
    tol: float | None
    evaluation: dict[str, Any] | None  # the hold-out part's metrics
    warnings: list[str]


class RowExplanation(TypedDict):
    baseline_decision: float
    contributions: dict[str, float]  # per raw input column; they add up to decision_value


class Prediction(TypedDict, total=False):
    id: str | int
    clipped: bool
    label: Any
    decision_value: float  # binary: f(x); multi-class: the predicted class's score
    decision_values: list[float] | None  # multi-class: one per class
    probability: float | None  # calibrated models: the label's probability
    probabilities: dict[str, float] | None  # calibrated models: per class (as text)
    explanation: RowExplanation | None  # with explain=True


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
    explanation: dict[str, Any] | None  # with explain=True: method, baseline


class Evaluation(TypedDict, total=False):
    model_id: int
    source: str  # dataset or file
    dataset_id: int | None
    n: int
    metrics: dict[str, Any]  # as the model detail's evaluation
    curves: dict[str, Any]  # roc, pr, reliability


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
