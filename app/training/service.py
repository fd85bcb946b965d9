"""Training data functions: check a /train request against its dataset and queue the job;
the checks of algorithm names, hyper-parameters and grids (``check_name``, ``check_params``,
``check_grid``), which experiments make too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.problems import invalid
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.jobs import service as jobs
from app.jobs.kinds import read_params
from app.jobs.orm import Job
from app.models.schemas import TrainOutcome
from app.training import cluster, parameters
from app.training.admission import check_fit_limits, estimate_training
from app.training.fit_plan import FitPlan
from app.training.msvmav_fields import HYPER_PARAMETERS
from app.training.parameters import check_grid, check_name, check_params
from app.training.schemas import SearchSpec, TrainJob, TrainRequest
from app.training.warm import Start
from app.training.weights import check_class_weight, check_weight_column
from solver import default_test_fraction, holdout_sizes, split_indices


def submit_train(
    session: Session,
    request: TrainRequest,
    *,
    max_fit_bytes: int | None = None,
    max_fit_seconds: float | None = None,
    settings: Settings | None = None,
) -> Job:
    """Queue a training job after checking what can be checked without fitting; the job's
    params keep admission's ``estimate`` (peak bytes, path, seconds). With ``settings``, a
    job the Dask cluster will fit (``app.training.cluster.on_cluster``) is checked against
    what the cluster fit can do (422) instead of this machine's memory and time limits."""
    # Locked until the job is committed: a concurrent DELETE /datasets/{id} waits, then sees it.
    (dataset,) = datasets.lock_or_raise(session, [request.dataset_id], [["body", "dataset_id"]])
    if len(dataset.classes) < 2:
        raise invalid(
            ["body", "dataset_id"],
            f"the dataset has one class ({dataset.classes[0]!r}); training needs at least two"
            if dataset.classes
            else "the dataset has no labels",
        )
    on_cluster = settings is not None and cluster.on_cluster(dataset, settings)
    request = normalise_search(request, on_cluster)
    if "test_fraction" not in request.model_fields_set and not on_cluster:
        # a hold-out by default (solver.protocol.default_test_fraction); below its smallest
        # data set the model's evaluation is cross-validated
        request = request.model_copy(
            update={"test_fraction": default_test_fraction(dataset.n_rows)})
    n_train = dataset.n_rows
    if request.test_fraction is not None:
        n_train, n_test = holdout_sizes(dataset.n_rows, request.test_fraction)
        if n_test < 1 or n_train < 2:
            raise invalid(
                ["body", "test_fraction"],
                f"test_fraction {request.test_fraction} of {dataset.n_rows} rows leaves "
                f"{n_train} for training and {n_test} for testing",
            )
    check_training_part(dataset, request)
    check_weight_column(session, dataset, request, on_cluster)
    fixed, explicit = resolve_estimator_params(request)
    params = request.model_dump(mode="json")
    auto = _resolve_search(request, dataset, fixed, explicit, n_train, params)
    # Top-level defaults that do not apply (another algorithm's, or searched over) are left out.
    for name in HYPER_PARAMETERS:
        if name != "kernel" and name not in fixed:
            params.pop(name, None)
    params["estimator_params"] = fixed
    if on_cluster:
        fixed = cluster.cluster_params(request, fixed, dataset)
        cluster.check_request(request, fixed, dataset, settings)
        params["estimator_params"] = fixed
        return _enqueue(session, params, dataset)
    admission = (
        estimate_auto(session, dataset, fixed, params["search"], n_train) if auto
        else estimate_training(
            session, dataset, request.algorithm, fixed, params.get("search"), n_train)
    )
    check_fit_limits(
        admission, dataset, request.algorithm, max_bytes=max_fit_bytes, max_seconds=max_fit_seconds
    )
    if admission is not None:
        params["estimate"] = admission.stored()
    return _enqueue(session, params, dataset)


def _enqueue(session: Session, params: dict[str, Any], dataset: Dataset) -> Job:
    """Queue the request's ``FitPlan`` (its params resolved and checked above): the JSON the
    worker runs as it is (app.training.fit_plan)."""
    plan = FitPlan.checked(params)
    return jobs.enqueue(session, kind="train", params=dict(plan.stored), dataset_id=dataset.id)


# fields that weight the rows rather than choose the model: given alone, the default search stays
NOT_CHOOSING = {"class_weight"}


def _resolve_search(request: TrainRequest, dataset: Dataset, fixed: dict[str, Any],
                    explicit: set[str], n_train: int, params: dict[str, Any]) -> bool:
    """The job's search as the worker reads it: an auto search's kernels, or a grid's values
    (``params["search"]``, edited); whether it is an auto search."""
    auto = request.search is not None and request.search.grid == "auto"
    if auto:
        params["search"]["kernels"] = auto_kernels(request, fixed, explicit)
    elif request.search is not None:
        params["search"]["grid_values"] = resolve_search_grid(
            request, dataset, fixed, explicit, n_train
        )
    return auto


def normalise_search(request: TrainRequest, on_cluster: bool) -> TrainRequest:
    """The request with ``search`` as a SearchSpec or None: a name (``"auto"``, ``"quick"``,
    ``"paper"``) is that grid, ``"none"`` no search; not given, ``"auto"`` when the request
    sets no hyper-parameter of the model (MSVMAv, no top-level hyper-parameter, no
    ``params``) and the fit runs here, else none. An auto search's folds are AUTO_CV unless
    ``search.cv`` is given; ``budget_seconds`` and ``algorithms`` belong to ``auto`` only."""
    from solver import AUTO_CV

    search = request.search
    if "search" not in request.model_fields_set:
        chose = (set(HYPER_PARAMETERS) - NOT_CHOOSING) & request.model_fields_set or request.params
        default = not (on_cluster or chose or request.algorithm != "msvmav")
        search = SearchSpec(grid="auto") if default else None
    if search is not None and search.grid == "auto":
        if "cv" not in search.model_fields_set:
            search = search.model_copy(update={"cv": AUTO_CV})
    elif search is not None:
        for name in ("budget_seconds", "algorithms"):
            if getattr(search, name) is not None:
                raise invalid(["body", "search", name],
                              f"{name} applies to the auto search only (search.grid 'auto')")
    return request.model_copy(update={"search": search})


def auto_kernels(request: TrainRequest, fixed: dict[str, Any], explicit: set[str]) -> list[str]:
    """The kernels an auto search races: the request's ``kernel`` when given (linear or rbf),
    else both; the hyper-parameters it searches (alpha, beta, gamma, unless given) leave
    ``fixed``."""
    from solver import AUTO_KERNELS as KERNELS

    if "kernel" in request.model_fields_set:
        if request.kernel not in KERNELS:
            raise invalid(["body", "kernel"], f"the auto search races the kernels "
                          f"{list(KERNELS)}; for {request.kernel!r} give search.grid "
                          "'quick', 'paper' or a grid")
        kernels = [request.kernel]
    else:
        kernels = list(KERNELS)
    for name in ("kernel", "alpha", "beta", "gamma"):
        if name not in explicit:
            fixed.pop(name, None)
    return kernels


def estimate_auto(session: Session, dataset: Dataset, fixed: dict[str, Any],
                  search: dict[str, Any], n_train: int) -> Any:
    """Admission of an auto search: the final fit's memory at its largest (an RBF winner's
    exact kernel where the race uses it) and, for the time, the budget plus that fit."""
    from solver import default_budget, rbf_path

    kernels = search.get("kernels") or ["linear"]
    # calibrated from the race's out-of-fold values: no calibration folds to add
    plain = {**fixed, "calibration": "none"}
    budget = search.get("budget_seconds") or default_budget(n_train, dataset.n_features)
    path = rbf_path(n_train, dataset.n_features, len(dataset.classes), budget_seconds=budget)
    worst = ({**path, **plain, "kernel": "rbf"}
             if "rbf" in kernels else {**plain, "kernel": "linear"})
    admission = estimate_training(session, dataset, "msvmav", worst, None, n_train)
    if admission is None or admission.seconds is None:
        return admission
    return replace(admission, seconds=admission.seconds + float(budget))


def check_training_part(dataset: Dataset, request: TrainRequest) -> None:
    """422 naming ``test_fraction`` when the training part leaves a class fewer than 2 rows,
    or, when searching, fewer rows than the search's folds: the hold-out split is computed
    here as the job will compute it (``solver.protocol.split_indices`` on the dataset's class
    counts, with the request's seed; a stratified split's counts per class depend only on
    those)."""
    check_class_weight(dataset, request)
    counts = np.asarray(dataset.class_counts, dtype=np.int64)
    y = np.repeat(np.arange(len(counts)), counts)
    train_idx, _ = split_indices(y, request.test_fraction, request.seed)
    in_train = np.bincount(y[train_idx], minlength=len(counts))
    need = max(2, request.search.cv if request.search is not None else 0)
    short = [(c, int(k)) for c, k in zip(dataset.classes, in_train, strict=True) if k < need]
    if not short:
        return
    cls, k = short[0]
    why = (f"{request.search.cv}-fold search needs {need} rows of each class"
           if request.search is not None and need > 2 else "every class needs 2 rows")
    fraction = request.test_fraction
    where = (f"test_fraction {fraction} leaves" if fraction else "the training part holds")
    message = (
        f"{where} {k} training rows of class {cls!r} ({len(short)} classes short, "
        f"{len(train_idx)} training rows in all); {why}: lower test_fraction"
        + (" or search.cv" if request.search is not None else "") + " or upload more rows"
    )
    problem = invalid(["body", "test_fraction"], message)
    if request.search is not None and min(in_train) >= 2 and problem.errors is not None:
        # only the search's folds are short: search.cv is the other field that fixes it
        problem.errors.append(
            {"loc": ["body", "search", "cv"], "field": "search.cv", "message": message}
        )
    raise problem


def resolve_estimator_params(request: TrainRequest) -> tuple[dict[str, Any], set[str]]:
    """The estimator's keyword arguments (besides ``random_state``) and the names the client
    gave explicitly.

    MSVMAv takes every top-level hyper-parameter (with its defaults); another algorithm takes
    the top-level ones it has only when they were given (its own defaults apply otherwise) and
    rejects given ones it does not have. ``params`` adds any estimator parameter; a name both
    given at the top level and in ``params`` is ambiguous (422)."""
    algorithm = request.algorithm
    names = set(parameters.param_names(algorithm))
    given = request.model_fields_set
    fixed: dict[str, Any] = {"kernel": request.kernel, "calibration": request.calibration}
    if request.class_weight is not None:
        fixed["class_weight"] = request.class_weight
    explicit: set[str] = set()
    for name in HYPER_PARAMETERS:
        if name == "kernel":
            continue
        if name not in names:
            if name in given:
                raise invalid(
                    ["body", name],
                    f"not a parameter of {algorithm}; its parameters are "
                    f"{parameters.tunable_names(algorithm)}",
                )
            continue
        if name in given:
            explicit.add(name)
            fixed[name] = getattr(request, name)
        elif algorithm == "msvmav":
            fixed[name] = getattr(request, name)
    check_params(algorithm, request.params, ["body", "params"])
    for name, value in request.params.items():
        if name in explicit:
            raise invalid(
                ["body", "params", name], f"{name} is also given at the top level; give it once"
            )
        explicit.add(name)
        fixed[name] = value
    return fixed, explicit


def resolve_search_grid(
    request: TrainRequest,
    dataset: Dataset,
    fixed: dict[str, Any],
    explicit: set[str],
    n_train: int,
) -> dict[str, list[Any]]:
    """The grid as {parameter: values} (named grids expanded for this dataset's feature
    count); its parameters are dropped from ``fixed`` (a default) or rejected (given)."""
    from solver import resolve_grid

    search = request.search
    assert search is not None
    loc: list[str | int] = ["body", "search", "grid"]
    if isinstance(search.grid, dict):
        grid = check_grid(request.algorithm, search.grid, loc)
    else:
        grid = resolve_grid(
            request.algorithm, search.grid, kernel=request.kernel, n_features=dataset.n_features
        )
    for name in grid:
        if name in explicit:
            where = "params" if name in request.params else name
            raise invalid(
                loc if isinstance(search.grid, str) else [*loc, name],
                f"the {search.grid if isinstance(search.grid, str) else 'given'} grid searches "
                f"over {name}, which is also fixed by `{where}`; give it in one place",
            )
        fixed.pop(name, None)
    if n_train < search.cv:
        raise invalid(
            ["body", "search", "cv"],
            f"{search.cv} folds need at least {search.cv} training rows; there are {n_train}",
        )
    return grid


# --- refits on new rows (app.loop's retrain jobs) ---------------------------------------------

# the stored model's params that are not the estimator's keyword arguments
_NOT_ESTIMATOR = ("test_fraction", "seed", "random_state", "warm_start")


def refit_params(dataset: Dataset, algorithm: str, params: dict[str, Any], scaling: str,
                 search: SearchSpec | None) -> dict[str, Any]:
    """The ``TrainJob`` params (JSON) of a refit of a stored model's fit on new rows: its
    algorithm, fitted hyper-parameters (``params``: the model's), scaling, hold-out fraction and
    seed; with ``search``, that search resolved as /train resolves one (its grid for this
    dataset, an auto search's kernels) instead of the fitted hyper-parameters."""
    fitted = {k: v for k, v in params.items() if k not in _NOT_ESTIMATOR}
    head = {"dataset_id": dataset.id, "algorithm": algorithm, "scaling": scaling,
            "test_fraction": params.get("test_fraction"), "seed": params.get("seed")}
    if "calibration" in fitted:
        head["calibration"] = fitted["calibration"]
    if search is None:
        job = TrainJob.model_validate({**head, "search": None, "estimator_params": fitted})
        return job.stored()
    request = TrainRequest.model_validate(
        {**head, "kernel": fitted.get("kernel", "linear"), "search": search.model_dump()})
    request = normalise_search(request, False)
    fixed, explicit = resolve_estimator_params(request)
    job_params = request.model_dump(mode="json")
    n_train = dataset.n_rows
    if request.test_fraction is not None:
        n_train, _ = holdout_sizes(dataset.n_rows, request.test_fraction)
    _resolve_search(request, dataset, fixed, explicit, n_train, job_params)
    for name in HYPER_PARAMETERS:
        if name != "kernel" and name not in fixed:
            job_params.pop(name, None)
    job_params["estimator_params"] = fixed
    return read_params(TrainJob, job_params).stored()


def fit_rows(X: Any, y: np.ndarray, job_params: dict[str, Any], *, start: Start | None = None,
             callback: Any = None,
             split: tuple[np.ndarray, np.ndarray] | None = None) -> TrainOutcome:
    """One fit of ``job_params`` (a ``TrainJob``'s JSON) on (X, y): X (n, d) float64 or CSR,
    the caller's to spend; y (n,) raw labels. ``start``: warm-started from a parent
    (app.training.warm); ``split``: the (train, test) rows instead of the seeded split. The
    same pipeline as a ``train`` job's."""
    from app.training.pipeline import train

    plan = FitPlan.load(job_params)
    return train(X, y, plan, callback=callback, overwrite_X=True, start=start, split=split)


__all__ = ["Start", "check_grid", "check_name", "check_params", "resolve_estimator_params",
           "refit_params", "fit_rows", "resolve_search_grid", "submit_train"]
