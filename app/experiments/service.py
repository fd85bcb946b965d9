"""Experiment jobs: submit (checks), read, render (Table 1, margin plots). The worker's runner
is ``app.experiments.runner``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.pagination import PageParams, paginate
from app.core.plotting import render_margin_cdf
from app.core.problems import conflict, invalid, not_found, unknown
from app.datasets import service as datasets
from app.experiments.orm import ExperimentResult
from app.experiments.schemas import (
    ExperimentDatasetResult,
    ExperimentJob,
    ExperimentOut,
    ExperimentRequest,
    ExperimentSummary,
)
from app.ingest.imputation import needs_fit
from app.jobs import service as jobs
from app.jobs.kinds import read_params
from app.jobs.orm import Job
from app.training import service as training
from solver import holdout_sizes

KIND = "experiment"


# -- submit ------------------------------------------------------------------------------------
def submit(session: Session, request: ExperimentRequest) -> Job:
    """Queue an experiment after checking everything that can be checked without fitting."""
    _unique(request.dataset_ids, "dataset_ids")
    _unique(request.algorithms, "algorithms")
    # Locked until the job is committed, as for /train: exclusive with deleting one of them.
    ids = request.dataset_ids
    locked = datasets.lock_or_raise(
        session, ids, [["body", "dataset_ids", i] for i in range(len(ids))]
    )
    for i, (dataset_id, dataset) in enumerate(zip(ids, locked, strict=True)):
        loc: list[str | int] = ["body", "dataset_ids", i]
        if len(dataset.classes) < 2:
            raise invalid(loc, f"dataset {dataset_id} has fewer than two classes")
        if needs_fit(dataset.encoding or {}):
            raise invalid(loc, f"dataset {dataset_id} keeps missing cells to impute "
                          f"(missing={dataset.options.get('missing')!r}); experiments do not "
                          "impute: upload it with missing='drop', or train it with /train")
        n_train, n_test = holdout_sizes(dataset.n_rows, request.test_size)
        if n_test < 1 or n_train < max(request.cv, 2):
            raise invalid(
                loc,
                f"dataset {dataset_id} has {dataset.n_rows} rows: test_size "
                f"{request.test_size} leaves {n_train} for training ({request.cv} folds need "
                f"at least {request.cv}) and {n_test} for testing",
            )
    if isinstance(request.grid, dict):
        if not request.grid:
            raise invalid(["body", "grid"], "give `quick`, `paper` or grids per algorithm")
        for name, grid in request.grid.items():
            _member(name, request.algorithms, ["body", "grid", name])
            training.check_grid(name, grid, ["body", "grid", name])
    for name, params in request.params.items():
        _member(name, request.algorithms, ["body", "params", name])
        training.check_params(name, params, ["body", "params", name])
    # the job's params are the request, read back as the runner will
    job = read_params(ExperimentJob, request.model_dump(mode="json"))
    return jobs.enqueue(session, kind=KIND, params=job.model_dump(mode="json"),
                        dataset_id=request.dataset_ids[0])


def _unique(values: list[Any], field: str) -> None:
    seen: set[Any] = set()
    for i, v in enumerate(values):
        if v in seen:
            raise invalid(["body", field, i], f"{v!r} is listed twice")
        seen.add(v)


def _member(name: str, chosen: list[str], loc: list[str | int]) -> None:
    training.check_name(name, loc)
    if name not in chosen:
        raise invalid(loc, f"{name} is not among the experiment's algorithms {chosen}")


# -- read --------------------------------------------------------------------------------------
def get_or_raise(session: Session, experiment_id: int) -> Job:
    job = session.get(Job, experiment_id)
    if job is None or job.kind != KIND:
        raise not_found("experiment", experiment_id)
    return job


def list_page(session: Session, page: PageParams) -> tuple[list[Job], str | None]:
    return paginate(session, select(Job).where(Job.kind == KIND), Job.id, page)


def links(job_id: int) -> dict[str, str]:
    base = f"/experiments/{job_id}"
    return {
        "job": f"/jobs/{job_id}",
        "table_markdown": f"{base}/table.md",
        "table_csv": f"{base}/table.csv",
        "margins_png": f"{base}/margins.png",
        "margins_svg": f"{base}/margins.svg",
    }


def summary_out(job: Job) -> ExperimentSummary:
    return ExperimentSummary(
        id=job.id,
        status=job.status,  # type: ignore[arg-type]
        progress=job.progress,
        message=job.message,
        error=job.error,
        cancel_requested=job.cancel_requested,
        params=job.params,
        summary=job.result,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        links=links(job.id),
    )


def results(session: Session, job: Job) -> list[ExperimentResult]:
    return list(
        session.scalars(
            select(ExperimentResult)
            .where(ExperimentResult.job_id == job.id)
            .order_by(ExperimentResult.position)
        )
    )


def detail_out(session: Session, job: Job) -> ExperimentOut:
    rows = results(session, job) if job.status == "succeeded" else None
    return ExperimentOut(
        **summary_out(job).model_dump(),
        results=None
        if rows is None
        else [
            ExperimentDatasetResult(dataset_id=r.dataset_id, name=r.name, result=r.result)
            for r in rows
        ],
    )


def finished_results(
    session: Session, experiment_id: int
) -> tuple[Job, list[ExperimentResult]]:
    """The experiment and its per-data-set results; 409 unless it succeeded."""
    job = get_or_raise(session, experiment_id)
    if job.status != "succeeded":
        why = f": {job.error}" if job.error else ""
        raise conflict(
            f"experiment {experiment_id} is {job.status}{why}; tables and plots exist once it "
            "has succeeded"
        )
    return job, results(session, job)


def table(session: Session, experiment_id: int, fmt: str) -> str:
    from app.experiments.tables import to_csv, to_markdown

    job, rows = finished_results(session, experiment_id)
    by_name = {r.name: r.result for r in rows}
    return (to_markdown if fmt == "markdown" else to_csv)(by_name, job.params.get("algorithms"))


def margins_plot(session: Session, experiment_id: int, dataset_id: int | None, fmt: str) -> bytes:
    from solver import ExperimentResult as SolverResult

    _, rows = finished_results(session, experiment_id)
    if dataset_id is None:
        row = rows[0]
    else:
        matching = [r for r in rows if r.dataset_id == dataset_id]
        if not matching:
            raise unknown(
                ["query", "dataset_id"],
                f"dataset {dataset_id} is not one of experiment {experiment_id}'s "
                f"{[r.dataset_id for r in rows]}",
            )
        row = matching[0]
    result = SolverResult.from_dict(row.result)
    session.commit()  # read-only: end the transaction before rendering
    return render_margin_cdf(
        result.margin_curves(),
        title=f"{row.name}: cumulative margin distribution (test part of split 1)",
        fmt=fmt,
    )
