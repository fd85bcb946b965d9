"""The worker's runner for ``train`` jobs (registered in ``app.jobs.registry``): load the
dataset, ``app.training.pipeline.train`` it with progress reports, and save the model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app.core.orm import Dataset
from app.datasets import service as datasets
from app.jobs.runtime import JobContext, JobResult, describe_iteration, running_progress
from app.models import service as models
from app.registry import service as registry
from app.training.pipeline import DEFAULT_ALGORITHM, TrainOutcome, holdout_sizes, train
from solver.parallel import dask_cluster


def training_rows(dataset: Dataset, params: dict[str, Any]) -> str:
    """The rows the fit uses, as the job's message says it: the training part, not the whole
    dataset, when a hold-out fraction is set (``36168 training rows (9043 held out)``)."""
    fraction = params.get("test_fraction")
    if not fraction:
        return f"{dataset.n_rows} rows"
    n_train, n_test = holdout_sizes(dataset.n_rows, fraction)
    return f"{n_train} training rows ({n_test} held out)"


def run_train_job(ctx: JobContext) -> JobResult:
    from solver.model_selection import n_cells

    with ctx.sessions() as session:
        dataset = datasets.get(session, ctx.dataset_id) if ctx.dataset_id is not None else None
        if dataset is None:
            raise ValueError(f"dataset {ctx.dataset_id} no longer exists")
        X, y = datasets.load_arrays(session, dataset)
    algorithm = ctx.params.get("algorithm") or DEFAULT_ALGORITHM
    search = ctx.params.get("search")
    rows = training_rows(dataset, ctx.params)
    callback: Callable[[dict[str, Any]], Any] = ctx.reporter
    search_callback = None
    if search:
        # grid_values is the grid resolved to a dict at submission
        cells = n_cells(
            algorithm,
            dataset.n_features,
            grid=search.get("grid_values") or {},
            cv=int(search.get("cv", 5)),
        )
        total = cells + 1  # the refit on the whole training part counts as one more
        refit_progress = running_progress(cells / total)

        def search_callback(done: int, n: int) -> None:
            ctx.reporter.tick(done / total, f"CV cell {done}/{n}")

        def refit_callback(info: dict[str, Any]) -> None:
            if ctx.reporter.due():
                _, detail = describe_iteration(info)
                ctx.reporter.report(refit_progress, f"refit with the best parameters: {detail}")

        callback = refit_callback
        ctx.reporter.report(0.0, f"cross-validating {algorithm}: {cells} cells on {rows}")
    else:
        ctx.reporter.report(0.0, f"fitting {algorithm} on {rows} × {dataset.n_features} features")
    # a search's cells run on the Dask cluster when one is configured
    with dask_cluster(ctx.settings.dask_scheduler if search else None):
        outcome = train(
            X,
            y,
            ctx.params,
            callback=callback,
            search_callback=search_callback,
            n_jobs=ctx.settings.search_jobs,
        )

    write = _writer(ctx, outcome, dataset)
    notes = [f"{outcome.algorithm} fitted in {outcome.fit_seconds:.2f} s"]
    if outcome.n_iter:
        notes.append(f"{outcome.n_iter} iterations")
    if outcome.holdout_accuracy is not None:
        notes.append(f"hold-out accuracy {outcome.holdout_accuracy:.4f}")
    message = ", ".join(notes)
    for warning in outcome.summary.get("warnings") or ():
        message += f"; warning: {warning}"
    return JobResult(write=write, message=message)


def _writer(
    ctx: JobContext, outcome: TrainOutcome, dataset: Dataset
) -> Callable[[Session], dict[str, Any]]:
    """The job's final write: the model rows and, with ``register_as``, its registry version,
    added to the session the worker commits with the job's ``succeeded`` (or not at all)."""
    register_as = ctx.params.get("register_as")

    def write(session: Session) -> dict[str, Any]:
        model = models.save(
            session, outcome=outcome, dataset=dataset, job_id=ctx.job_id, params=ctx.params
        )
        registered = None
        if register_as:
            version = registry.add_version(session, register_as, model.id, create_missing=True)
            registered = {"name": register_as, "version": version.version}
        return {
            "model_id": model.id,
            "result": {
                "model_id": model.id,
                "registered_as": registered,
                "holdout_accuracy": outcome.holdout_accuracy,
                "fit_seconds": outcome.fit_seconds,
                "n_iter": outcome.n_iter,
                "algorithm": outcome.algorithm,
                "best_params": outcome.search["best_params"] if outcome.search else None,
                "best_score": outcome.search["best_score"] if outcome.search else None,
            },
        }

    return write
