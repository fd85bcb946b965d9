"""A training request as the worker runs it: ``FitPlan``, one frozen value.

POST /train (``app.training.service.submit_train``) resolves and checks the request once: the
estimator's keyword arguments against the parameters its class declares
(``app.training.parameters``: ``get_params()`` names, ``_parameter_constraints`` values), the
search's grid for the dataset, the hold-out. ``FitPlan.checked`` makes the plan of that result
and ``FitPlan.stored`` is the job's params (JSON: the job row, and what GET /jobs/{id} shows).
The worker's ``train`` kind reads it back with ``FitPlan.load`` — the JSON's shape read as the
``TrainJob`` schema (a row edited by hand fails the job naming the field), then the
algorithm's one lookup in ``solver``'s table of algorithms (``estimator_class``) — and runs it
as it is: the pipeline, the cluster fit and the job's messages take the plan, and make no check
of the parameters nor any by-name lookup of their own (the solver's protocol resolves the
plan's algorithm in that same table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from app.jobs.kinds import read_params
from app.training.schemas import TrainJob
from solver import Plan, appends_ones, estimator_class


@dataclass(frozen=True)
class SearchPlan:
    """The search before the final fit, as resolved at submission: ``grid`` as requested
    ("auto", "quick", "paper" or the given {parameter: values}), ``values`` the grid for the
    dataset (None for auto), ``kernels`` the kernels an auto search races."""

    grid: str | Mapping[str, Any]
    values: Mapping[str, list[Any]] | None
    cv: int
    seed: int | None
    budget_seconds: float | None
    kernels: tuple[str, ...] | None
    algorithms: tuple[str, ...] | None

    @property
    def auto(self) -> bool:
        return self.grid == "auto"


@dataclass(frozen=True)
class FitPlan:
    """One fit as the worker runs it (see the module's docstring)."""

    algorithm: str  # the short name (``msvmav``, ``svm``, ...): a key of solver's table
    estimator: type  # its estimator class, looked up once (solver.estimator_class)
    appends_ones: bool  # the fit appends a column of ones to the rows (loaded beside one)
    kernel: str  # the estimator's kernel (an auto search races its own)
    params: Mapping[str, Any]  # the estimator's keyword arguments but kernel and random_state
    search: SearchPlan | None
    test_fraction: float | None
    seed: int | None
    scaling: bool  # min-max scaling fitted on the training part
    weight_column: str | None
    handle_unknown: str
    register_as: str | None
    stored: Mapping[str, Any]  # the job's params (JSON), as queued

    @classmethod
    def checked(cls, params: dict[str, Any]) -> FitPlan:
        """The plan of a request resolved at submission (``params``: TrainJob's fields)."""
        job = read_params(TrainJob, params)
        return cls._of(job, job.stored())

    @classmethod
    def load(cls, stored: Mapping[str, Any]) -> FitPlan:
        """The plan of a queued job's params (``FitPlan.stored``); JobParamsError naming the
        field of a row that is no TrainJob."""
        return cls._of(read_params(TrainJob, dict(stored)), dict(stored))

    @classmethod
    def _of(cls, job: TrainJob, stored: dict[str, Any]) -> FitPlan:
        chosen = dict(job.estimator_params)
        kernel = chosen.pop("kernel", "linear")
        return cls(
            algorithm=job.algorithm, estimator=estimator_class(job.algorithm),
            appends_ones=appends_ones(job.algorithm, job.kernel), kernel=kernel,
            params=MappingProxyType(chosen), search=_search(job),
            test_fraction=job.test_fraction, seed=job.seed, scaling=job.scaling == "minmax",
            weight_column=job.weight_column, handle_unknown=job.handle_unknown,
            register_as=job.register_as, stored=MappingProxyType(stored),
        )

    def protocol(self) -> Plan:
        """The solver's plan (``solver.protocol``): the one place where the request's ``seed``
        becomes the fit's seed (estimator and, unless ``search.seed`` is given, the folds)."""
        spec = self.search
        extra: dict[str, Any] = {}
        if spec is not None and spec.auto:
            extra = {"budget_seconds": spec.budget_seconds,
                     "kernels": spec.kernels or ("linear", "rbf"),
                     "algorithms": spec.algorithms or ("msvmav",)}
        grid = None if spec is None else "auto" if spec.auto else spec.values or spec.grid
        return Plan(
            algorithm=self.algorithm, kernel=self.kernel, params=dict(self.params),
            grid=grid if not isinstance(grid, Mapping) else dict(grid),
            cv=spec.cv if spec else 5, seed=self.seed, cv_seed=spec.seed if spec else None,
            scaling=self.scaling, **extra,
        )


def _search(job: TrainJob) -> SearchPlan | None:
    spec = job.search
    if spec is None:
        return None
    return SearchPlan(
        grid=spec.grid, values=spec.grid_values, cv=spec.cv, seed=spec.seed,
        budget_seconds=spec.budget_seconds,
        kernels=tuple(spec.kernels) if spec.kernels else None,
        algorithms=tuple(spec.algorithms) if spec.algorithms else None,
    )
