"""Request and response bodies of /experiments."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.ids import DbId, Whole
from app.core.pagination import Page
from app.jobs.schemas import JobStatus
from app.training.schemas import AlgorithmName, GridValue
from solver import PAPER_ORDER

REQUEST_EXAMPLE = {
    "dataset_ids": [1],
    "algorithms": ["msvmav", "svm", "lssvm", "mamc"],
    "kernel": "linear",
    "splits": 5,
    "grid": "quick",
    "cv": 3,
    "seed": 0,
    "test_size": 0.2,
}

_RESULT_EXAMPLE = {
    "dataset": "wdbc",
    "protocol": {"kernel": "linear", "splits": 5, "cv": 3, "grid": "quick", "test_size": 0.2},
    "algorithms": {
        "msvmav": {
            "accuracies": [0.97, 0.96, 0.98, 0.97, 0.96],
            "mean": 0.968,
            "std": 0.008,
            "params": [{"alpha": 16.0, "beta": 0.0625}, "…"],
            "cv_scores": [0.975, "…"],
            "seconds": 1.2,
        },
        "svm": {"accuracies": ["…"], "mean": 0.962, "std": 0.011, "params": ["…"]},
    },
    "comparisons": {"svm": {"outcome": "tie", "p_value": 0.31, "statistic": 1.13}},
    "margins": {"msvmav": {"n": 114, "mean": 0.93, "cdf": {"x": ["…"], "p": ["…"]}}},
    "seconds": 9.8,
}

_SUMMARY_EXAMPLE = {
    "id": 12,
    "status": "succeeded",
    "progress": 1.0,
    "message": "2 data sets × 5 splits done in 19.6 s",
    "error": None,
    "cancel_requested": False,
    "params": REQUEST_EXAMPLE,
    "summary": {
        "datasets": [
            {"dataset_id": 1, "name": "wdbc", "mean_accuracy": {"msvmav": 0.968, "svm": 0.962}}
        ],
        "seconds": 19.6,
    },
    "created_at": "2026-01-01T12:00:00Z",
    "started_at": "2026-01-01T12:00:01Z",
    "finished_at": "2026-01-01T12:00:21Z",
    "links": {
        "job": "/jobs/12",
        "table_markdown": "/experiments/12/table.md",
        "table_csv": "/experiments/12/table.csv",
        "margins_png": "/experiments/12/margins.png",
        "margins_svg": "/experiments/12/margins.svg",
    },
}


class ExperimentRequest(BaseModel):
    """The paper's protocol on stored data sets: ``splits`` random train/test partitions,
    min-max scaling fitted on each training part, k-fold CV over a grid per algorithm, refit,
    test accuracy; mean ± std per algorithm and a paired t-test against MSVMAv."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        json_schema_extra={"examples": [REQUEST_EXAMPLE]},
    )

    dataset_ids: list[DbId] = Field(
        min_length=1, max_length=100, description="Stored data sets (one table row each), "
        "each at most once", json_schema_extra={"uniqueItems": True},
    )
    algorithms: list[AlgorithmName] = Field(
        default_factory=lambda: list(PAPER_ORDER),
        min_length=1,
        description="Algorithms (table columns), each at most once; default all seven in the "
        "paper's order",
        json_schema_extra={"uniqueItems": True},
    )
    kernel: Literal["linear", "rbf"] = Field("linear", description="Kernel of every algorithm")
    splits: Whole = Field(30, ge=1, le=1000, description="Random train/test partitions")
    test_size: float = Field(0.2, gt=0, lt=1, description="Test share of each partition")
    grid: Literal["quick", "paper"] | dict[str, dict[str, list[GridValue]]] = Field(
        "quick",
        description="`quick`, `paper`, or explicit grids per algorithm "
        "{algorithm: {parameter: [values]}} (algorithms left out use `quick`)",
    )
    cv: Whole = Field(5, ge=2, le=20, description="Folds of the inner cross-validation")
    seed: Whole = Field(
        0, ge=0, le=2**31 - 1, description="Partition r uses seed + r (splits and folds)"
    )
    scaling: Literal["train", "global"] = Field(
        "train",
        description="`train`: min-max fitted on each training part (test part clipped); "
        "`global`: fitted once on the whole data set (the paper's literal wording)",
    )
    params: dict[str, dict[str, GridValue]] = Field(
        default_factory=dict,
        description='Fixed hyper-parameters per algorithm, e.g. {"msvmav": {"max_iter": 50}}',
    )


class ExperimentJob(ExperimentRequest):
    """The params of an ``experiment`` job: the request as submitted, validated when the job
    is created and when the worker's runner (``app.experiments.runner``) reads them."""

    model_config = ConfigDict(strict=False, json_schema_extra=None)


class ExperimentDatasetResult(BaseModel):
    dataset_id: int | None = Field(description="The stored data set (null once deleted)")
    name: str = Field(description="Its row name in the tables")
    result: dict[str, Any] = Field(
        description="`solver.experiments.ExperimentResult.to_dict()`: dataset, protocol, "
        "algorithms (accuracies, mean, std, params, cv_scores, seconds), comparisons "
        "(outcome win/tie/loss from MSVMAv's side, p_value, statistic), margins (statistics "
        "with CDF of each model on the first partition's test part), seconds",
        json_schema_extra={"examples": [_RESULT_EXAMPLE]},
    )


class ExperimentSummary(BaseModel):
    """An experiment job: status, progress and the headline accuracies once done."""

    model_config = ConfigDict(json_schema_extra={"examples": [_SUMMARY_EXAMPLE]})

    id: int = Field(description="The job id (also `GET /jobs/{id}`)")
    status: JobStatus
    progress: float = Field(ge=0, le=1, description="Fits done / fits in all (CV cells + refits)")
    message: str
    error: str | None
    cancel_requested: bool
    params: dict[str, Any] = Field(description="The request")
    summary: dict[str, Any] | None = Field(
        description="Once succeeded: mean test accuracy per data set and algorithm"
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    links: dict[str, str] = Field(description="The job, the tables and the margin plots")


class ExperimentOut(ExperimentSummary):
    """An experiment with, once succeeded, the full result per data set."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    **_SUMMARY_EXAMPLE,
                    "results": [{"dataset_id": 1, "name": "wdbc", "result": _RESULT_EXAMPLE}],
                }
            ]
        }
    )

    results: list[ExperimentDatasetResult] | None = Field(
        description="Per data set, in request order; null until succeeded"
    )


class ExperimentPage(Page[ExperimentSummary]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_SUMMARY_EXAMPLE], "next_cursor": None}]}
    )
