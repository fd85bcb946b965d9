"""Request bodies of /train and the parameters a ``train`` job stores."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from app.core.ids import DbId, Whole, whole_in
from app.jobs.schemas import TRAIN_PARAMS_EXAMPLE
from app.models.schemas import AlgorithmName
from app.registry.schemas import Name
from app.training.msvmav_fields import hyper_parameter_fields
from solver import CALIBRATION_FOLDS, CALIBRATIONS, PAPER_ORDER

_TRAIN_EXAMPLE = TRAIN_PARAMS_EXAMPLE

# A hyper-parameter value: a JSON scalar (checked against the estimator, which names the field)
GridValue = Any

_SEARCH_EXAMPLE = {"grid": {"alpha": [1, 16], "beta": [0.25, 1]}, "cv": 5, "seed": 0}
_AUTO_EXAMPLE = {"grid": "auto", "budget_seconds": 30, "algorithms": ["msvmav", "svm"]}

# the names a search may be given by, besides a SearchSpec
SEARCH_MODES = ("auto", "none", "quick", "paper")
MAX_BUDGET_SECONDS = 86_400.0


class SearchSpec(BaseModel):
    """Cross-validated grid search on the training part before the final fit."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        json_schema_extra={"examples": [_SEARCH_EXAMPLE, _AUTO_EXAMPLE]},
    )

    grid: Literal["auto", "quick", "paper"] | dict[str, list[GridValue]] = Field(
        "quick",
        description="`auto` (MSVMAv's kernel — linear or rbf — and alpha, beta, gamma chosen "
        "by successive halving over stratified folds within `budget_seconds`; "
        "docs/algorithm.md), `quick` (3 values per parameter), `paper` (the paper's grids: "
        "2^-10 … 2^10 in steps of 4×) — rbf/poly add the gamma grid {2^j / d} — or an explicit "
        "{parameter: [values]} (names as in the estimator's `get_params()`)",
    )
    cv: Whole = Field(
        5, ge=2, le=20,
        description="Folds (shuffled, seeded KFold; `auto`: stratified, 3 unless given)",
    )
    budget_seconds: float | None = Field(
        None,
        gt=0,
        le=MAX_BUDGET_SECONDS,
        description="`auto` only: the search's time budget in seconds; null: derived from the "
        "training rows (solver.auto_search.default_budget), stated in the job's message",
    )
    algorithms: list[AlgorithmName] | None = Field(
        None,
        min_length=1,
        description="`auto` only: the algorithms that race (comparators with their `quick` "
        "grids); null: MSVMAv's own kernels",
    )
    seed: whole_in(0, 2**32 - 1) | None = Field(
        None,
        description="Seed of the fold assignment; null: the request's `seed`",
    )


class _TrainHead(BaseModel):
    """TrainRequest's first fields (a base, so that the derived ones follow them)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    dataset_id: DbId = Field(description="Dataset to train on")
    algorithm: AlgorithmName = Field(
        "msvmav",
        description="msvmav (the paper's method) or a comparator: "
        + ", ".join(PAPER_ORDER[1:]),
    )
    params: dict[str, GridValue] = Field(
        default_factory=dict,
        description="Hyper-parameters of the chosen algorithm by their estimator names "
        '(e.g. `{"C": 4}` for svm, `{"C": 1, "mu": 0.8, "theta": 0.2}` for odm); unknown '
        "names answer 422. `kernel` and `seed` are the top-level fields",
    )
    search: SearchSpec | None = Field(
        None,
        description="Choose hyper-parameters by cross-validation on the training part (after "
        "scaling), then fit the best configuration on the whole training part. `auto` is "
        "`{\"grid\": \"auto\"}`, `quick`/`paper` that grid, `none` (or null) no search. Not "
        "given: `auto` when the request sets no hyper-parameter (no `kernel`, `alpha`, … "
        "`params`) and the algorithm is msvmav, else no search",
        json_schema_extra={"anyOf": [{"$ref": "#/components/schemas/SearchSpec"},
                                     {"type": "string", "enum": list(SEARCH_MODES)},
                                     {"type": "null"}]},
    )

    @field_validator("search", mode="before")
    @classmethod
    def _search_by_name(cls, value: Any) -> Any:
        """A name is that search: ``"none"`` no search, ``"auto"``/``"quick"``/``"paper"``
        that grid; any other string is refused here (422 naming ``search``)."""
        if not isinstance(value, str):
            return value
        if value not in SEARCH_MODES:
            raise ValueError(f"use one of {list(SEARCH_MODES)} or a search object, got "
                             f"{value!r}")
        return None if value == "none" else {"grid": value}

# MSVMAv's hyper-parameters, derived from the solver's declaration (app.training.msvmav_fields)
_WithHyperParameters = create_model(
    "_WithHyperParameters", __base__=_TrainHead, **hyper_parameter_fields()
)


class TrainRequest(_WithHyperParameters):  # type: ignore[misc, valid-type]
    """One fit of any algorithm (``algorithm``: a key of ``solver.ALGORITHMS``), optionally
    after a cross-validated grid search, plus data handling.

    The top-level hyper-parameters (``kernel`` … ``n_components``) are MSVMAv's, with its
    defaults; other algorithms take those of them that they have (``kernel``, ``gamma``,
    ``degree``, ``coef0``, and ``max_iter``/``tol``/``fit_intercept`` where they exist) when
    given explicitly, and everything else through ``params``."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        json_schema_extra={"examples": [_TRAIN_EXAMPLE]},
    )

    scaling: Literal["minmax", "none"] = Field(
        "minmax",
        description="minmax: fit [0, 1] scaling on the training part, apply (clipped) at "
        "prediction — as in the paper; none: use features as stored",
    )
    calibration: Literal[CALIBRATIONS] = Field(  # type: ignore[valid-type]
        "sigmoid",
        description="Probabilities for the model's answers, fitted on cross-validated decision "
        f"values of the training part ({CALIBRATION_FOLDS} stratified folds, seeded by "
        "`seed`; scikit-learn's CalibratedClassifierCV(ensemble=False) is the reference): "
        "`sigmoid` (Platt), `isotonic`, or `none` (no probabilities; the fit costs no extra "
        "folds). Any algorithm; never part of a search's cells, only of the final fit",
    )
    test_fraction: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Hold out this fraction (stratified, seeded by `seed`) for the model's "
        "`evaluation`. Not given: 0.2 from 100 rows on; below 100 rows, or given as null, no "
        "hold-out and 5-fold cross-validated metrics of the training rows instead, with a "
        "warning. The hold-out's row indices are the model's `holdout.rows`",
    )
    seed: whole_in(0, 2**32 - 1) | None = Field(
        0,
        description="The fit's seed: hold-out split, the estimator's random_state (Nyström "
        "sampling, ...) and, unless `search.seed` is given, the search's folds",
    )
    class_weight: Literal["balanced"] | dict[str, Annotated[float, Field(ge=0, le=1e12)]] | None = (
        Field(
            None,
            description="Weights of the classes (msvmav, svm, svr; scikit-learn's semantics): "
            "`balanced` (class c weighs n / (k n_c) on the training part), {class: weight >= 0} "
            "(classes left out weigh 1; keys as the dataset's `classes` spell them), or null "
            "(none). MSVMAv then maximises the weighted average margin and minimises the "
            "weighted semi-variance (docs/algorithm.md, \"Weights\"); the calibration's folds "
            "and calibrator use the same weights, so the served probabilities and labels are "
            "those of the weighted classes. Kept in the model's params",
            examples=["balanced", {"1": 4.0}],
        )
    )
    weight_column: str | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="A numeric column of the dataset (by its name in the dataset's "
        "`feature_names`) whose values weigh the rows: sample weights (msvmav, svm, svr), "
        "times `class_weight`'s. Checked when the job is queued: a column that is not the "
        "dataset's, not numeric, or holds a value that is missing, not finite or negative, or "
        "weighs every (training) row 0 is a 422 naming it and the first bad row. Not a "
        "feature: the model is fitted without it, and its prediction doors do not expect it "
        "(a row or file that has it is read as one that has a dropped column). The final fit "
        "and its calibration's folds are weighted; a search chooses the hyper-parameters on "
        "unweighted folds; the hold-out's metrics are unweighted. Kept in the model's params",
        examples=["exposure"],
    )
    handle_unknown: Literal["error", "ignore"] = Field(
        "error",
        description="A category the training data did not have, at prediction: an error "
        "(error), or a row of zeros in that column's one-hot block (ignore, as scikit-learn's "
        "OneHotEncoder does). Kept in the model's encoding",
    )
    register_as: Name | None = Field(
        None,
        description="Registered model the trained model becomes the next version of (created "
        "on first use), in the same transaction that marks the job succeeded",
        examples=["wdbc"],
    )


class SearchJob(SearchSpec):
    """A search as a ``train`` job stores it: the grid resolved at submission too."""

    model_config = ConfigDict(strict=False)

    grid_values: dict[str, list[GridValue]] | None = Field(
        None, description="The grid as {parameter: values}, named grids expanded for the dataset"
    )
    kernels: list[str] | None = Field(
        None, description="`auto`: the kernels that race (the request's `kernel` when given)"
    )


class TrainJob(TrainRequest):
    """The params of a ``train`` job, validated when the job is created
    (``app.training.service.submit_train``) and when the worker's runner reads them.

    The request's fields as given, without the top-level hyper-parameters that do not apply
    to the algorithm (or that the search sets), plus what submission resolved: the estimator's
    keyword arguments and the search's grid."""

    model_config = ConfigDict(strict=False, json_schema_extra=None)

    search: SearchJob | None = None  # type: ignore[assignment]  # normalised at submission
    estimator_params: dict[str, Any] = Field(
        description="The estimator's keyword arguments besides random_state"
    )
    estimate: dict[str, Any] | None = Field(
        None,
        description="Admission's prediction: `peak_bytes` and `path` (solver.memory), "
        "`seconds` (solver.fit_time; null when the algorithm is not modelled)",
    )

    def stored(self) -> dict[str, Any]:
        """The JSON the job row keeps: only the fields that were set."""
        return self.model_dump(mode="json", exclude_unset=True)
