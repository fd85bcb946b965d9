"""Request and response bodies of /train and /jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.ids import DbId
from app.core.orm import JobAttemptOutcome
from app.core.pagination import Page
from app.registry.schemas import Name
from app.training.algorithms import MAX_MAGNITUDE, MIN_MAGNITUDE, AlgorithmName
from solver import MSVMAv

# The API's defaults are the estimator's, so the two never drift apart.
_D = MSVMAv().get_params()

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]

_TRAIN_EXAMPLE = {
    "dataset_id": 1,
    "kernel": "linear",
    "alpha": 16.0,
    "beta": 0.25,
    "max_iter": 100,
    "scaling": "minmax",
    "test_fraction": 0.2,
    "seed": 0,
}

_JOB_EXAMPLE = {
    "id": 7,
    "kind": "train",
    "status": "running",
    "progress": 0.42,
    "message": "task 1/1, iteration 42/100: θ̂=0.8731, SV/θ̂²=0.1204",
    "params": _TRAIN_EXAMPLE,
    "dataset_id": 1,
    "model_id": None,
    "result": None,
    "error": None,
    "cancel_requested": False,
    "attempts": 1,
    "worker_id": "host:1234:ab12",
    "created_at": "2026-01-01T12:00:00Z",
    "started_at": "2026-01-01T12:00:01Z",
    "finished_at": None,
    "heartbeat_at": "2026-01-01T12:00:03Z",
}


# A hyper-parameter value: a JSON scalar (checked against the estimator, which names the field)
GridValue = Any

_SEARCH_EXAMPLE = {"grid": {"alpha": [1, 16], "beta": [0.25, 1]}, "cv": 5, "seed": 0}


class SearchSpec(BaseModel):
    """Cross-validated grid search on the training part before the final fit."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        json_schema_extra={"examples": [_SEARCH_EXAMPLE]},
    )

    grid: Literal["quick", "paper"] | dict[str, list[GridValue]] = Field(
        "quick",
        description="`quick` (3 values per parameter), `paper` (the paper's grids: 2^-10 … 2^10 "
        "in steps of 4×) — rbf/poly add the gamma grid {2^j / d} — or an explicit "
        "{parameter: [values]} (names as in the estimator's `get_params()`)",
    )
    cv: int = Field(5, ge=2, le=20, description="Folds (shuffled, seeded KFold)")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed of the fold assignment")


class TrainRequest(BaseModel):
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

    dataset_id: DbId = Field(description="Dataset to train on")
    algorithm: AlgorithmName = Field(
        "msvmav",
        description="msvmav (the paper's method) or a comparator: svm, svr, lssvm, mamc, odm, fmm",
    )
    params: dict[str, GridValue] = Field(
        default_factory=dict,
        description="Hyper-parameters of the chosen algorithm by their estimator names "
        '(e.g. `{"C": 4}` for svm, `{"C": 1, "mu": 0.8, "theta": 0.2}` for odm); unknown '
        "names answer 422. `kernel` and `seed` are the top-level fields",
    )
    search: SearchSpec | None = Field(
        None,
        description="Choose hyper-parameters by k-fold cross-validation on the training part "
        "(after scaling), then fit the best configuration on the whole training part",
    )
    kernel: Literal["linear", "rbf", "poly"] = Field("linear", description="Kernel")
    alpha: float = Field(
        _D["alpha"],
        ge=MIN_MAGNITUDE,
        le=MAX_MAGNITUDE,
        description="α > 0: weight of the margin mean term",
    )
    beta: float = Field(
        _D["beta"],
        ge=MIN_MAGNITUDE,
        le=MAX_MAGNITUDE,
        description="β > 0: weight of the margin semi-variance term",
    )
    gamma: float | None = Field(
        None,
        ge=MIN_MAGNITUDE,
        le=MAX_MAGNITUDE,
        description="rbf/poly kernel width; null → 1 / n_features",
    )
    degree: int = Field(_D["degree"], ge=1, le=20, description="poly kernel degree")
    coef0: float = Field(
        _D["coef0"], ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE, description="poly kernel constant term"
    )
    max_iter: int = Field(
        _D["max_iter"], ge=1, le=1_000_000, description="Most iterations per task"
    )
    tol: float = Field(
        _D["tol"],
        ge=0,
        le=MAX_MAGNITUDE,
        description="Stop when the objective changes less than this",
    )
    fit_intercept: bool = Field(_D["fit_intercept"], description="Learn a bias term")
    approximation: Literal["auto", "exact", "low_rank", "nystroem"] = Field(
        _D["approximation"],
        description="rbf/poly: auto (exact kernel up to 1,024 rows, above that a low-rank "
        "factor whose rank meets kernel_tol, exact again if that rank would be large), exact, "
        "low_rank, or Nyström features",
    )
    kernel_tol: float = Field(
        _D["kernel_tol"],
        ge=0,
        lt=1,
        description="Low-rank path: largest relative trace error of the kernel factor "
        "(the model reports the rank and error reached)",
    )
    n_components: int = Field(
        _D["n_components"],
        ge=1,
        le=100_000,
        description="Nyström components (approximation=nystroem); the low-rank path's "
        "largest rank",
    )
    scaling: Literal["minmax", "none"] = Field(
        "minmax",
        description="minmax: fit [0, 1] scaling on the training part, apply (clipped) at "
        "prediction — as in the paper; none: use features as stored",
    )
    test_fraction: float | None = Field(
        None, gt=0, lt=1, description="Hold out this fraction (stratified) for testing"
    )
    seed: int | None = Field(
        0, ge=0, le=2**32 - 1, description="Seed of the hold-out split and Nyström sampling"
    )
    register_as: Name | None = Field(
        None,
        description="Registered model the trained model becomes the next version of (created "
        "on first use), in the same transaction that marks the job succeeded",
        examples=["wdbc"],
    )


class JobOut(BaseModel):
    """A background job and its progress."""

    model_config = ConfigDict(
        from_attributes=True,
        protected_namespaces=(),
        json_schema_extra={"examples": [_JOB_EXAMPLE]},
    )

    id: int
    kind: str = Field(description="What the job does: `train` or `experiment`")
    status: JobStatus
    progress: float = Field(ge=0, le=1, description="Fraction done, 0–1")
    message: str = Field(
        description="Latest progress message (iteration, θ̂, SV/θ̂²; `CV cell k/n` during a "
        "search; `fit k/n` in an experiment)"
    )
    params: dict[str, Any] = Field(
        description="The job's parameters as submitted (train: without top-level defaults that "
        "do not apply to the algorithm, plus the resolved `estimator_params` and, with a "
        "search, `search.grid_values`)"
    )
    dataset_id: int | None
    model_id: int | None = Field(description="The trained model, once succeeded")
    result: dict[str, Any] | None = Field(description="Kind-specific result summary")
    error: str | None = Field(description="Why it failed")
    cancel_requested: bool
    attempts: int = Field(
        description="How many times a worker claimed it (a job whose worker was lost is "
        "re-queued and claimed again, up to MSVMAV_MAX_ATTEMPTS lost workers)"
    )
    worker_id: str | None = Field(description="Worker that ran (or runs) it")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None


class JobAttemptOut(BaseModel):
    """One claim of the job by a worker."""

    model_config = ConfigDict(from_attributes=True)

    number: int = Field(description="1 for the first claim, 2 for the next, …")
    worker_id: str = Field(description="The worker (host:pid:random)")
    started_at: datetime
    finished_at: datetime | None = Field(description="null while it runs")
    outcome: JobAttemptOutcome = Field(
        description="running; succeeded/failed/cancelled; requeued (its worker shut down and "
        "put the job back); lost (its worker stopped heartbeating for MSVMAV_LEASE_SECONDS: "
        "killed or frozen)"
    )


_ATTEMPTS_EXAMPLE = [
    {
        "number": 1,
        "worker_id": "host:1187:9f03aa",
        "started_at": "2026-01-01T11:59:40Z",
        "finished_at": "2026-01-01T11:59:58Z",
        "outcome": "lost",
    },
    {
        "number": 2,
        "worker_id": "host:1234:ab12",
        "started_at": "2026-01-01T12:00:01Z",
        "finished_at": None,
        "outcome": "running",
    },
]


class JobDetail(JobOut):
    """A job with the history of its attempts."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{**_JOB_EXAMPLE, "attempts": 2, "attempt_history": _ATTEMPTS_EXAMPLE}]
        }
    )

    attempt_history: list[JobAttemptOut] = Field(description="Each claim by a worker, oldest first")


class JobPage(Page[JobOut]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_JOB_EXAMPLE], "next_cursor": None}]}
    )
