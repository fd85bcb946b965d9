"""Response bodies of /models, and the outcome of a training run that becomes a model."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.pagination import Page
from app.ingest.imputation import imputation_summary
from solver import KERNEL_APPROXIMATIONS, LINEAR_SOLVERS, PAPER_ORDER, MinMaxScaling

#: an algorithm's short name, in the paper's order (solver.algorithms)
AlgorithmName = Literal[PAPER_ORDER]  # type: ignore[valid-type]

_STATS_EXAMPLE = {
    "n": 455,
    "mean": 0.93,
    "semivariance": 0.04,
    "sv_ratio": 0.046,
    "variance": 0.21,
    "std": 0.46,
    "min": -0.8,
    "max": 2.1,
    "quantiles": {"5": 0.1, "10": 0.3, "25": 0.7, "50": 0.95, "75": 1.2, "90": 1.5, "95": 1.7},
    "frac_nonpositive": 0.03,
    "histogram": {"edges": [-0.8, -0.655, "…"], "counts": [1, 0, "…"]},
    "cdf": {"x": [-0.8, "…"], "p": [0.0, "…"]},
}

_SUMMARY_EXAMPLE = {
    "id": 3,
    "job_id": 7,
    "dataset_id": 1,
    "algorithm": "msvmav",
    "params": {"kernel": "linear", "alpha": 16.0, "beta": 0.25, "max_iter": 100, "tol": 1e-08},
    "scaling": "minmax",
    "classes": [1, 2],
    "n_features": 30,
    "n_train": 455,
    "n_test": 114,
    "holdout_accuracy": 0.974,
    "fit_seconds": 0.21,
    "n_iter": 37,
    "created_at": "2026-01-01T12:00:05Z",
}


class ModelSummary(BaseModel):
    """A trained model's headline facts."""

    model_config = ConfigDict(
        from_attributes=True,
        protected_namespaces=(),
        json_schema_extra={"examples": [_SUMMARY_EXAMPLE]},
    )

    id: int
    job_id: int | None = Field(description="Job that trained it")
    dataset_id: int | None = Field(description="Training dataset (null once deleted)")
    algorithm: str = Field(description="A name of solver.algorithms: " + ", ".join(PAPER_ORDER))
    params: dict[str, Any] = Field(
        description="The estimator's hyper-parameters as fitted (after a search: the chosen "
        "ones), hold-out fraction and seed"
    )
    scaling: str = Field(description="`minmax` or `none`")
    classes: list[Any] = Field(description="Class labels in their original values")
    n_features: int
    n_train: int = Field(description="Rows fitted on")
    n_test: int = Field(description="Rows held out")
    holdout_accuracy: float | None = Field(
        description="Accuracy on the hold-out part of the labels the model serves by its id: "
        "under `holdout_rule`"
    )
    holdout_rule: str = Field(
        "argmax",
        description="The decision rule whose labels `holdout_accuracy` (and the detail's "
        "`evaluation`) measure: the model's own rule once one is set on it (`POST "
        "/models/{ref}/threshold` stored on the model), else the default it was trained with "
        "(`argmax`; `sign` without probabilities). An alias's own rule is measured by "
        "`POST /models/{name@alias}/evaluate` and the leaderboard",
    )
    fit_seconds: float
    n_iter: int = Field(description="Iterations (the most over one-vs-rest tasks)")
    created_at: datetime


_SEARCH_OUT_EXAMPLE = {
    "best_params": {"alpha": 16.0, "beta": 0.25},
    "best_score": 0.971,
    "best_index": 1,
    "cv": 5,
    "seed": 0,
    "grid": {"alpha": [1, 16], "beta": [0.25, 1]},
    "grid_values": {"alpha": [1, 16], "beta": [0.25, 1]},
    "fixed_params": {"max_iter": 100, "tol": 1e-08},
    "n_configs": 4,
    "seconds": 0.8,
    "table": [
        {
            "params": {"alpha": 1.0, "beta": 0.25},
            "mean_accuracy": 0.965,
            "std": 0.012,
            "scores": [0.97, 0.95, 0.97, 0.96, 0.98],
            "fit_seconds": 0.05,
        },
        "…",
    ],
}


class SearchOut(BaseModel):
    """The cross-validated grid search that chose the model's hyper-parameters."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_SEARCH_OUT_EXAMPLE]})

    best_params: dict[str, Any] = Field(description="The chosen configuration (fitted on all)")
    best_score: float = Field(description="Its mean CV accuracy")
    best_index: int = Field(description="Its row in `table`")
    cv: int = Field(description="Folds")
    seed: int | None = Field(description="Seed of the folds")
    grid: str | dict[str, Any] = Field(description="The grid as requested")
    grid_values: dict[str, Any] = Field(description="The grid searched, {parameter: values}")
    fixed_params: dict[str, Any] = Field(description="Parameters fixed for every fit")
    n_configs: int = Field(description="Configurations (rows of `table`)")
    seconds: float = Field(description="Duration of the search")
    table: list[dict[str, Any]] = Field(
        description="One row per configuration in grid order: params, mean_accuracy, std "
        "(ddof=1), scores (per fold), fit_seconds. An auto search (`mode` auto, with its "
        "`reason`, `budget_seconds`, `algorithm`, `kernel`): one row per candidate with "
        "setting, algorithm, kernel, params, folds, scores, mean_accuracy (null when not run), "
        "seconds and status (finalist, dropped at rung 0, stopped: budget, skipped: budget)"
    )


class HoldoutResult(BaseModel):
    n: int
    accuracy: float
    margins: dict[str, Any] | None = Field(description="Margin statistics of the hold-out part")
    rows: list[int] | None = Field(
        None,
        description="The hold-out's row indices in the dataset (0-based, sorted): the rows the "
        "model did not train on (null for models trained before they were kept)",
    )


class FitPath(BaseModel):
    """The path an MSVMAv fit took, as `auto` chose it or the request's params set it."""

    linear_solver: Literal[LINEAR_SOLVERS] | None = Field(  # type: ignore[valid-type]
        description="Linear kernel: how the linear step's system was solved (null for kernels)"
    )
    kernel_approximation: Literal[KERNEL_APPROXIMATIONS] | None = Field(  # type: ignore[valid-type]
        description="Kernels: the kernel matrix used (null for linear)"
    )
    fit_info: dict[str, Any] = Field(
        description="The fit's counters, each named for what it counts (the linear step's: "
        "`inverse_builds`, `inverse_updates`, `cholesky_factorisations`, "
        "`preconditioner_rebuilds`, `preconditioner_updates`, `gram_builds`, `gram_folds`, "
        "`unfolded_changes`, `cg_iterations`, `threaded_products`, `margin_passes`, "
        "`margin_rows_exact`; the "
        "kernel's `pivots`, `n_components`), "
        "kernel `auto`'s "
        "`rank_choice` (`tol`, `fixed_rank`, `exact`, `capped`) and `rank_reason`, and, "
        "where a low-rank fit ended exact, the `fallback` reason"
    )


class ColumnImputation(BaseModel):
    strategy: str = Field(description="`mean`, `median`, `most_frequent` or `constant` (the "
                          "upload's `missing`)")
    fill: Any = Field(description="The value a missing cell takes: fitted on the training "
                      "part (a number, or a category of a categorical column)")


class FeatureColumn(BaseModel):
    name: str
    kind: str = Field(description="`numeric` or `categorical` (one-hot)")
    handle_unknown: str | None = Field(
        None, description="Categorical columns: `error` or `ignore` (an unseen category "
        "encodes as all zeros), chosen at training")
    impute: ColumnImputation | None = Field(
        None, description="The imputation of missing cells (null: a missing cell is an error)")


class ModelDetail(ModelSummary):
    """Everything about a model: weights (linear) or expansion summary (kernels), scaling,
    training and hold-out margin statistics, and a summary of the optimisation history."""

    model_config = ConfigDict(
        from_attributes=True,
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    **_SUMMARY_EXAMPLE,
                    "feature_names": ["radius_mean", "texture_mean", "…"],
                    "weights": {
                        "feature_names": ["radius_mean", "texture_mean", "…"],
                        "coef": [[0.41, 0.87, "…"]],
                        "intercept": [-1.2],
                        "norm": [3.4],
                    },
                    "kernel_summary": None,
                    "scaling_ranges": {"method": "minmax", "data_min": [6.98], "data_max": [28.1]},
                    "train_margins": _STATS_EXAMPLE,
                    "train_accuracy": 0.98,
                    "holdout": {"n": 114, "accuracy": 0.974, "margins": _STATS_EXAMPLE},
                    "history": {"n_records": 37, "stopped_early": False, "last": {}, "trace": []},
                    "search": None,
                    "fit_path": {
                        "linear_solver": "dense",
                        "kernel_approximation": None,
                        "fit_info": {"inverse_builds": 26, "inverse_updates": 17},
                    },
                }
            ]
        },
    )

    feature_names: list[str]
    weights: dict[str, Any] | None = Field(
        description="Linear kernel: coef (one row per one-vs-rest task) and intercept, in the "
        "scaled feature space, with the feature names. The score of a raw row x is "
        "clip((x - data_min) / (data_max - data_min), 0, 1) @ coef.T + intercept, with "
        "data_min/data_max from `scaling_ranges` (a constant feature divides by 1) and the "
        "scaled features clipped to [0, 1] as for every prediction; positive means classes[1] "
        "(two classes), else the highest score wins"
    )
    kernel_summary: dict[str, Any] | None = Field(
        description="rbf/poly: expansion terms, gamma, coefficient norms; the support vectors "
        "and dual coefficients themselves are in `GET /models/{id}/export` (bundle or ONNX)"
    )
    scaling_ranges: dict[str, Any] = Field(description="Per-feature min/max of the scaling")
    train_margins: dict[str, Any] = Field(description="Margin statistics on the training part")
    train_accuracy: float | None
    holdout: HoldoutResult | None
    history: dict[str, Any] = Field(description="Iteration count, stop reason, sampled trace")
    search: SearchOut | None = Field(
        None, description="The cross-validated grid search, when the job asked for one"
    )
    fit_path: FitPath | None = Field(
        None, description="MSVMAv: how the fit was computed. Null for the other algorithms"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What the fit warned about (e.g. features far outside [0, 1] with "
        "`scaling: none`; a hold-out accuracy, balanced accuracy or ROC AUC that does not beat "
        "the majority-class baseline's; a class whose hold-out recall is below 0.1); the "
        "job's message says it too",
    )
    calibration: str = Field(
        "none",
        description="How the answers' probabilities were fitted: `sigmoid`, `isotonic`, or "
        "`none` (no probabilities)",
    )
    converged: bool | None = Field(
        None,
        description="MSVMAv: whether every task met its stopping rule (`stop` with `tol`: by "
        "default the relative change of SV/θ² over 5 iterations) within `max_iter` "
        "iterations; when not, `warnings` says so (null for the other algorithms)",
    )
    last_relative_change: float | None = Field(
        None,
        description="MSVMAv: the largest task's last step ||Δw||/√dim, the quantity `tol` "
        "bounds under `stop` `step` (under `objective` the rule is on SV/θ², see `converged`)",
    )
    tol: float | None = Field(None, description="MSVMAv: the stopping rule's tolerance")
    evaluation: dict[str, Any] | None = Field(
        None,
        description="The hold-out part's metrics of the labels the model serves by its id "
        "(its `decision_rule` names the rule once one is set on the model; before, argmax), "
        "(without a hold-out — fewer than 100 rows, or "
        "`test_fraction` null — 5-fold cross-validated metrics of the training rows, with "
        "`source: cross-validated` and a warning): n, accuracy, "
        "balanced_accuracy, majority_baseline, majority_class, beats_baseline, roc_auc, "
        "pr_auc (binary: a number; multi-class: macro and per_class one-vs-rest), log_loss, "
        "brier, ece (null without probabilities), confusion_matrix, per_class (precision, "
        "recall, f1, support); each as sklearn.metrics computes it",
    )
    evaluation_argmax: dict[str, Any] | None = Field(
        None,
        description="Once a rule is set on the model: the evaluation it was trained with "
        "(labels by `argmax`), beside `evaluation` (labels by the model's rule, its "
        "`decision_rule`); null while the model has no rule of its own",
    )
    sample_weight: dict[str, Any] | None = Field(
        None,
        description="A model trained with `weight_column`: that column (no feature of the "
        "model) and its training rows' weights — n, sum, min, max, mean, and `zero_rows`, "
        "the rows that weighed 0 (null: unweighted rows)",
    )
    columns: list[FeatureColumn] = Field(
        default_factory=list,
        description="The categorical and imputed feature columns in training order: kind, "
        "handle_unknown (categorical) and the imputation fitted at training (plain numeric "
        "columns without imputation are not listed)",
    )

    @classmethod
    def from_row(cls, model: Any) -> ModelDetail:
        s = model.summary or {}
        weights = s.get("weights")
        if weights is not None:
            weights = {"feature_names": list(model.feature_names), **weights}
        return cls.model_validate(
            {
                **ModelSummary.model_validate(model).model_dump(),
                "feature_names": model.feature_names,
                "weights": weights,
                "kernel_summary": s.get("kernel_summary"),
                "scaling_ranges": s.get("scaling") or {"method": model.scaling},
                "train_margins": s.get("train_margins") or {},
                "train_accuracy": s.get("train_accuracy"),
                "holdout": s.get("holdout"),
                "history": s.get("history") or {},
                "search": s.get("search"),
                "fit_path": s.get("fit_path"),
                "warnings": s.get("warnings") or [],
                "calibration": (model.params or {}).get("calibration") or "none",
                **(s.get("convergence") or {}),
                "evaluation": s.get("evaluation"),
                "evaluation_argmax": s.get("evaluation_argmax"),
                "sample_weight": s.get("sample_weight"),
                "columns": imputation_summary(model.encoding or {}),
            }
        )


class ModelPage(Page[ModelSummary]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_SUMMARY_EXAMPLE], "next_cursor": None}]}
    )


class MarginsOut(BaseModel):
    """Margin-distribution statistics (``solver.margin_statistics``) with histogram and CDF."""

    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "model_id": 3,
                    "source": "training",
                    "dataset_id": 1,
                    "n": 455,
                    "statistics": _STATS_EXAMPLE,
                }
            ]
        },
    )

    model_id: int
    source: str = Field(description="`training`, `holdout` (stored at fit time) or `dataset`")
    dataset_id: int | None
    n: int = Field(description="Rows the statistics are over")
    statistics: dict[str, Any]


@dataclass
class TrainOutcome:
    """A fitted estimator and what its model row keeps (app.training.pipeline.train)."""

    estimator: Any
    scaling: MinMaxScaling | None
    classes: list[Any]
    n_train: int
    n_test: int
    holdout_accuracy: float | None
    fit_seconds: float
    n_iter: int
    summary: dict[str, Any]
    algorithm: str = "msvmav"
    params: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] | None = None
    # the dataset's encoding with the imputation fitted on the training part (None: unchanged)
    encoding: dict[str, Any] | None = None
