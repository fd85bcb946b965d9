"""Job data functions: submit, read, list, cancel. Claiming and leases live in app.jobs.queue,
running in app.worker."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app import algorithms
from app.datasets import service as datasets
from app.jobs.schemas import TrainRequest
from app.orm import Dataset, Job, JobAttempt, utcnow
from app.pagination import PageParams, paginate
from app.problems import conflict, invalid, not_found
from app.training import HYPER_PARAMETERS, holdout_sizes


def get_or_raise(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise not_found("job", job_id)
    return job


def attempts(session: Session, job_id: int) -> list[JobAttempt]:
    """The job's attempts, oldest first."""
    return list(
        session.scalars(
            select(JobAttempt).where(JobAttempt.job_id == job_id).order_by(JobAttempt.number)
        )
    )


def list_page(
    session: Session, page: PageParams, status: str | None = None
) -> tuple[list[Job], str | None]:
    stmt = select(Job)
    if status is not None:
        stmt = stmt.where(Job.status == status)
    return paginate(session, stmt, Job.id, page)


def submit_train(
    session: Session, request: TrainRequest, *, max_fit_bytes: int | None = None
) -> Job:
    """Queue a training job after checking what can be checked without fitting."""
    # Locked until the job is committed: a concurrent DELETE /datasets/{id} waits, then sees it.
    (dataset,) = datasets.lock_or_raise(session, [request.dataset_id], [["body", "dataset_id"]])
    if len(dataset.classes) < 2:
        raise invalid(
            ["body", "dataset_id"],
            f"the dataset has one class ({dataset.classes[0]!r}); training needs at least two"
            if dataset.classes
            else "the dataset has no labels",
        )
    n_train = dataset.n_rows
    if request.test_fraction is not None:
        n_train, n_test = holdout_sizes(dataset.n_rows, request.test_fraction)
        if n_test < 1 or n_train < 2:
            raise invalid(
                ["body", "test_fraction"],
                f"test_fraction {request.test_fraction} of {dataset.n_rows} rows leaves "
                f"{n_train} for training and {n_test} for testing",
            )
    fixed, explicit = resolve_estimator_params(request)
    params = request.model_dump(mode="json")
    if request.search is not None:
        params["search"]["grid_values"] = resolve_search_grid(
            request, dataset, fixed, explicit, n_train
        )
    # Top-level defaults that do not apply (another algorithm's, or searched over) are left out.
    for name in HYPER_PARAMETERS:
        if name != "kernel" and name not in fixed:
            params.pop(name, None)
    params["estimator_params"] = fixed
    if max_fit_bytes is not None:
        check_fit_memory(
            session, dataset, request.algorithm, fixed, params.get("search"), n_train,
            max_fit_bytes,
        )
    return enqueue(session, kind="train", params=params, dataset_id=dataset.id)


def check_fit_memory(
    session: Session,
    dataset: Dataset,
    algorithm: str,
    fixed: dict[str, Any],
    search: dict[str, Any] | None,
    n_train: int,
    limit: int,
) -> None:
    """422 before queuing when the fit's predicted peak memory (the largest over a search's
    configurations, on the training rows) exceeds ``max_fit_bytes``."""
    from solver.comparators.grids import iter_configs
    from solver.memory import estimate_fit, gib

    nnz = datasets.stored_nnz(session, dataset)
    configs = iter_configs(search["grid_values"]) if search else [{}]
    try:
        worst = max(
            (estimate_fit(algorithm, n_train, dataset.n_features, nnz, {**fixed, **c},
                          n_classes=len(dataset.classes)) for c in configs),
            key=lambda e: e.peak_bytes,
        )
    except ValueError:  # parameters only fit() can judge: the job reports them as before
        return
    if worst.peak_bytes > limit:
        raise invalid(
            ["body", "dataset_id"],
            f"training {algorithm} on {n_train} rows x {dataset.n_features} features "
            f"({'dense' if nnz is None else f'{nnz} stored values'}) takes the {worst.path} path "
            f"and needs about {gib(worst.peak_bytes)} of memory, more than the "
            f"{gib(limit)} allowed (MSVMAV_MAX_FIT_BYTES); {worst.advice}",
            estimate_bytes=worst.peak_bytes,
            limit_bytes=limit,
            path=worst.path,
        )


def enqueue(session: Session, *, kind: str, params: dict, dataset_id: int | None) -> Job:
    """Add a new queued job of ``kind``, flushed, not committed (the route commits, with its
    Idempotency-Key record if any); validation and dataset locks are the caller's."""
    job = Job(
        kind=kind,
        status="queued",
        params=params,
        dataset_id=dataset_id,
        progress=0.0,
        message="queued",
        cancel_requested=False,
        attempts=0,
    )
    session.add(job)
    session.flush()
    return job


def cancel(session: Session, job_id: int) -> tuple[Job, bool]:
    """A queued job is cancelled at once; a running one gets its cancel flag set and its worker
    stops it within one iteration. Cancelling a cancelled job is a no-op; a finished one, 409.

    Returns the job and whether a running job was asked to stop (its worker may already have
    stopped it by the time the job is read back)."""
    job = get_or_raise(session, job_id)
    if job.status == "queued":
        done = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(
                status="cancelled",
                cancel_requested=True,
                finished_at=utcnow(),
                message="cancelled before it started",
            )
        ).rowcount
        if done:
            session.commit()
            session.refresh(job)
            return job, False
        session.rollback()  # a worker claimed it meanwhile: cancel it as a running job
        session.refresh(job)
    if job.status == "running":
        requested = session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running")
            .values(cancel_requested=True)
        ).rowcount
        session.commit()
        session.refresh(job)
        if requested or job.status == "cancelled":
            return job, bool(requested)
    if job.status == "cancelled":
        return job, False
    raise conflict(
        f"job {job_id} already {job.status}; only queued or running jobs can be cancelled"
    )


def resolve_estimator_params(request: TrainRequest) -> tuple[dict[str, Any], set[str]]:
    """The estimator's keyword arguments (besides ``random_state``) and the names the client
    gave explicitly.

    MSVMAv takes every top-level hyper-parameter (with its defaults); another algorithm takes
    the top-level ones it has only when they were given (its own defaults apply otherwise) and
    rejects given ones it does not have. ``params`` adds any estimator parameter; a name both
    given at the top level and in ``params`` is ambiguous (422)."""
    algorithm = request.algorithm
    names = set(algorithms.param_names(algorithm))
    given = request.model_fields_set
    fixed: dict[str, Any] = {"kernel": request.kernel}
    explicit: set[str] = set()
    for name in HYPER_PARAMETERS:
        if name == "kernel":
            continue
        if name not in names:
            if name in given:
                raise invalid(
                    ["body", name],
                    f"not a parameter of {algorithm}; its parameters are "
                    f"{algorithms.tunable_names(algorithm)}",
                )
            continue
        if name in given:
            explicit.add(name)
            fixed[name] = getattr(request, name)
        elif algorithm == "msvmav":
            fixed[name] = getattr(request, name)
    algorithms.check_params(algorithm, request.params, ["body", "params"])
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
    from solver.model_selection import resolve_grid

    search = request.search
    assert search is not None
    loc: list[str | int] = ["body", "search", "grid"]
    if isinstance(search.grid, dict):
        grid = algorithms.check_grid(request.algorithm, search.grid, loc)
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
