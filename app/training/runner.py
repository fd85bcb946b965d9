"""The worker's runner for ``train`` jobs (``TRAIN``, registered in ``app.jobs.registry``):
the job's ``FitPlan`` (app.training.fit_plan, read once from its params) run as it is: load
the dataset, ``app.training.pipeline.train`` it with progress reports, and save the model."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.ingest.column_specs import with_handle_unknown
from app.jobs.kinds import JobKind
from app.jobs.runtime import JobContext, JobResult, describe_iteration, running_progress
from app.models import service as models
from app.models.features import without_column
from app.models.schemas import TrainOutcome
from app.registry import service as registry
from app.training import cluster
from app.training.fit_plan import FitPlan
from app.training.pipeline import train
from app.training.schemas import TrainJob
from solver import MinMaxScaling, dask_cluster, default_budget, holdout_sizes, n_cells

Callbacks = tuple[Callable[[dict[str, Any]], Any], Callable[[int, int], None] | None]


def training_rows(dataset: Dataset, fraction: float | None) -> str:
    """The rows the fit uses, as the job's message says it: the training part, not the whole
    dataset, when a hold-out fraction is set (``36168 training rows (9043 held out)``)."""
    if not fraction:
        return f"{dataset.n_rows} rows"
    n_train, n_test = holdout_sizes(dataset.n_rows, fraction)
    return f"{n_train} training rows ({n_test} held out)"


def _fit_callback(ctx: JobContext, progress_of: Any) -> Any:
    """The fit's callback: each iteration's progress and message (``progress_of(info)``), and
    for the calibration's cross-validated folds (``info["phase"] == "calibration"``, after the
    fit itself) the fold's iteration at the progress the fit reached, so progress never goes
    back."""
    reached = [0.0]

    def callback(info: dict[str, Any]) -> None:
        if not ctx.reporter.due():
            return
        progress, message = progress_of(info)
        if info.get("phase") == "calibration":
            ctx.reporter.report(reached[0], f"calibrating probabilities (folds): {message}")
            return
        reached[0] = max(reached[0], progress)
        ctx.reporter.report(progress, message)

    return callback


def _callbacks(ctx: JobContext, job: FitPlan, dataset: Dataset) -> Callbacks:
    """The fit's and the search's progress callbacks, after the job's first message."""
    rows = training_rows(dataset, job.test_fraction)
    if job.search is None:
        ctx.reporter.report(0.0, f"fitting {job.algorithm} on {rows} × {dataset.n_features} "
                                 "features")
        return _fit_callback(ctx, describe_iteration), None
    if job.search.auto:
        return _auto_callbacks(ctx, job, dataset, rows)
    grid = dict(job.search.values or {})  # resolved to a dict at submission
    cells = n_cells(job.algorithm, dataset.n_features, grid=grid, cv=job.search.cv)
    total = cells + 1  # the refit on the whole training part counts as one more
    refit_progress = running_progress(cells / total)

    def search_callback(done: int, n: int) -> None:
        ctx.reporter.tick(done / total, f"CV cell {done}/{n}")

    def refit(info: dict[str, Any]) -> tuple[float, str]:
        _, detail = describe_iteration(info)
        return refit_progress, f"refit with the best parameters: {detail}"

    refit_callback = _fit_callback(ctx, refit)

    ctx.reporter.report(0.0, f"cross-validating {job.algorithm}: {cells} cells on {rows}")
    return refit_callback, search_callback


def _auto_callbacks(ctx: JobContext, job: FitPlan, dataset: Dataset, rows: str) -> Callbacks:
    """An auto search's progress: its cells (candidate, fold) to 90 %, then the final fit."""
    assert job.search is not None
    n_train = dataset.n_rows
    if job.test_fraction:
        n_train, _ = holdout_sizes(dataset.n_rows, job.test_fraction)
    budget = job.search.budget_seconds or default_budget(n_train, dataset.n_features)
    kernels = " and ".join(job.search.kernels or ("linear", "rbf"))
    refit_progress = running_progress(0.9)

    def search_callback(done: int, n: int) -> None:
        ctx.reporter.tick(0.9 * done / max(n, 1), f"auto search: cell {done} of at most {n}")

    def refit(info: dict[str, Any]) -> tuple[float, str]:
        _, detail = describe_iteration(info)
        return refit_progress, f"final fit of the auto search's choice: {detail}"

    ctx.reporter.report(0.0, f"auto search over {kernels} within a budget of {budget:g} s "
                             f"on {rows}")
    return _fit_callback(ctx, refit), search_callback


def _train_on_cluster(ctx: JobContext, job: FitPlan, dataset: Dataset) -> TrainOutcome:
    """The fit on the Dask cluster (app.training.cluster): a dataset by reference read where
    its partitions lie, or a large uploaded one sent there in blocks."""
    ctx.reporter.report(0.0, f"fitting {job.algorithm} on the Dask cluster: "
                             f"{dataset.n_rows} rows × {dataset.n_features} features")
    # A cancel (or the worker stopping) raises in the callback, as in a local fit; the cluster
    # fit cancels its pass's tasks and lets its blocks go before the exception propagates.
    callback = _fit_callback(ctx, describe_iteration)

    with dask_cluster(ctx.settings.dask_scheduler) as client:
        if dataset.reference is not None:
            scaling = cluster.reference_scaling(dataset, job)
            X, y = cluster.cluster_arrays(dataset, scaling)
        else:
            with ctx.sessions() as session:
                X_local, y_local = datasets.load_arrays(session, dataset)
            scaling = MinMaxScaling.fit(X_local) if job.scaling else None
            X, y = cluster.uploaded_arrays(X_local, y_local, scaling)
        return cluster.fit(X, y, job, scaling, client, callback)


def run_train_job(ctx: JobContext, job: FitPlan) -> JobResult:
    with ctx.sessions() as session:
        dataset = datasets.get(session, ctx.dataset_id) if ctx.dataset_id is not None else None
        if dataset is None:
            raise ValueError(f"dataset {ctx.dataset_id} no longer exists")
    started = time.perf_counter()
    if cluster.on_cluster(dataset, ctx.settings):
        outcome = _train_on_cluster(ctx, job, dataset)
    else:
        outcome = _train_here(ctx, job, dataset)
    return _persist(ctx, job, dataset, outcome, time.perf_counter() - started)


def _train_here(ctx: JobContext, job: FitPlan, dataset: Dataset) -> TrainOutcome:
    with ctx.sessions() as session:
        # rows beside a column of ones for the fits that append one: it is not copied then
        weighted = job.weight_column is not None
        X, y = datasets.load_arrays(
            session, dataset,
            intercept_room=not weighted and job.appends_ones)
        encoding = dataset.encoding
    weights = None
    if job.weight_column is not None:  # its values weigh the rows; it is no feature
        X, weights, encoding = without_column(X, encoding, job.weight_column)
    callback, search_callback = _callbacks(ctx, job, dataset)
    # a search's cells run on the Dask cluster when one is configured
    with dask_cluster(ctx.settings.dask_scheduler if job.search else None):
        outcome = train(X, y, job, callback=callback, search_callback=search_callback,
                        n_jobs=ctx.settings.search_jobs, overwrite_X=True,
                        encoding=encoding, sample_weight=weights)
    if weights is not None and outcome.encoding is None:
        outcome.encoding = encoding
    return outcome


def _persist(ctx: JobContext, job: FitPlan, dataset: Dataset, outcome: TrainOutcome,
             seconds: float) -> JobResult:
    """The model row (and registry version) the job writes with its success; ``seconds``: the
    job's training time (loading, search and fit), for its message."""
    register_as = job.register_as

    def write(session: Session) -> dict[str, Any]:
        model = models.save(
            session, outcome=outcome, dataset=dataset, job_id=ctx.job_id, params=dict(job.stored),
            chunk_bytes=ctx.settings.array_chunk_bytes,
        )
        fitted = outcome.encoding if outcome.encoding is not None else model.encoding
        model.encoding = with_handle_unknown(fitted, job.handle_unknown)
        if job.weight_column is not None:  # the rows' weights, not a feature
            model.feature_names = [n for n in model.feature_names if n != job.weight_column]
            model.n_features = len(model.feature_names)
            model.params = {**model.params, "weight_column": job.weight_column}
        registered = None
        if register_as:  # the registry version commits with the job's success, or not at all
            version = registry.add_version(session, register_as, model.id, create_missing=True)
            registered = {"name": register_as, "version": version.version}
        return {"model_id": model.id, "result": _result(model.id, outcome, registered)}

    return JobResult(write=write, message=_message(outcome, seconds))


def _result(
    model_id: int, outcome: TrainOutcome, registered: dict[str, Any] | None
) -> dict[str, Any]:
    """The job's result summary."""
    return {
        "model_id": model_id,
        "registered_as": registered,
        "holdout_accuracy": outcome.holdout_accuracy,
        "fit_seconds": outcome.fit_seconds,
        "n_iter": outcome.n_iter,
        "algorithm": outcome.algorithm,
        "best_params": outcome.search["best_params"] if outcome.search else None,
        "best_score": outcome.search["best_score"] if outcome.search else None,
        **(_auto_result(outcome.search) if outcome.search and outcome.search.get("mode") == "auto"
           else {}),
    }


def _auto_result(search: dict[str, Any]) -> dict[str, Any]:
    """An auto search's part of the job's result: what was tried (setting, CV score, folds,
    time, status), the winner and why (ranked by ``scoring``), the time spent against the
    budget, the final fit's predicted time."""
    return {"search": {
        "mode": "auto",
        "chosen": search["table"][search["best_index"]]["setting"],
        "algorithm": search["algorithm"],
        "kernel": search["kernel"],
        "reason": search["reason"],
        "budget_seconds": search["budget_seconds"],
        "seconds": search["seconds"],
        # the budget covers the race and the final fit, whose predicted time it reserved
        "final_fit_predicted_seconds": search.get("final_fit_seconds"),
        "scoring": search.get("scoring", "accuracy"),
        "cv": search["cv"],
        "tried": [{k: row[k] for k in ("setting", "mean_accuracy", "folds", "seconds", "status")}
                  for row in search["table"]],
    }}


def _message(outcome: TrainOutcome, seconds: float) -> str:
    """The job's final message: time, iterations, hold-out accuracy, warnings. With a search,
    the job's whole time (``seconds``: loading, the search's cells and the final fit), then
    each part; the final fit's alone would hide the search's (11 s of a 142 s job)."""
    if outcome.search and outcome.search.get("mode") == "auto":
        notes = [auto_note(outcome, seconds)]
    elif outcome.search:
        search = outcome.search
        notes = [f"{outcome.algorithm} trained in {seconds:.2f} s (search "
                 f"{search['seconds']:.2f} s over {search['n_configs']} configurations, final "
                 f"fit {outcome.fit_seconds:.2f} s)"]
    else:
        notes = [f"{outcome.algorithm} fitted in {outcome.fit_seconds:.2f} s"]
    if outcome.n_iter:
        notes.append(f"{outcome.n_iter} iterations")
    if outcome.holdout_accuracy is not None:
        notes.append(f"hold-out accuracy {outcome.holdout_accuracy:.4f}")
    message = ", ".join(notes)
    for warning in outcome.summary.get("warnings") or ():
        message += f"; warning: {warning}"
    return message


def auto_note(outcome: TrainOutcome, seconds: float) -> str:
    """An auto search's part of the job's message: the choice, why, and the time against the
    budget."""
    search = outcome.search or {}
    best = search["table"][search["best_index"]]
    predicted = search.get("final_fit_seconds")
    guess = "" if predicted is None else f", predicted {predicted:.2f} s"
    return (f"auto search chose {best['setting']} ({search['reason']}); trained in "
            f"{seconds:.2f} s of a {search['budget_seconds']:g} s budget (the race and the "
            f"final fit): search {search['seconds']:.2f} s over {search['n_configs']} "
            f"candidates, final fit {outcome.fit_seconds:.2f} s{guess}")


TRAIN = JobKind("train", TrainJob, run_train_job, read=FitPlan.load)
