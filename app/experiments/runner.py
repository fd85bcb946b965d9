"""The worker's runner for ``experiment`` jobs (``EXPERIMENT``, registered in
``app.jobs.registry``): load the data sets, run ``solver.experiments.run_experiment`` on each
with progress reports, and store one ``ExperimentResult`` row per data set."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.jsonable import jsonable
from app.datasets import service as datasets
from app.experiments.orm import ExperimentResult
from app.experiments.schemas import ExperimentJob
from app.jobs.kinds import JobKind
from app.jobs.runtime import JobContext, JobResult
from solver import dask_cluster, n_cells, run_experiment

#: (dataset id, table row name, X, y) of each data set of the experiment
Loaded = list[tuple[int, str, Any, np.ndarray]]


def _row_names(names: list[str], ids: list[int]) -> list[str]:
    """Table row names: the data sets' names, with the id added where names repeat."""
    return [
        f"{name} (#{i})" if names.count(name) > 1 else name
        for name, i in zip(names, ids, strict=True)
    ]


def _load(ctx: JobContext, job: ExperimentJob) -> Loaded:
    found = []
    with ctx.sessions() as session:
        for dataset_id in job.dataset_ids:
            dataset = datasets.get(session, dataset_id)
            if dataset is None:
                raise ValueError(f"dataset {dataset_id} no longer exists")
            X, y = datasets.load_arrays(session, dataset)
            found.append((dataset.id, dataset.name, X, np.asarray(y)))
    names = _row_names([name for _, name, _, _ in found], [i for i, _, _, _ in found])
    return [(i, name, X, y) for (i, _, X, y), name in zip(found, names, strict=True)]


def _fits(job: ExperimentJob, n_features: int) -> int:
    """The fits (CV cells and refits) of one data set of ``n_features`` features."""
    grid = job.grid

    def grid_of(a: str) -> Any:
        return grid.get(a, "quick") if isinstance(grid, dict) else grid

    return job.splits * sum(
        n_cells(a, n_features, kernel=job.kernel, grid=grid_of(a), cv=job.cv) + 1
        for a in job.algorithms
    )


def run_experiment_job(ctx: JobContext, job: ExperimentJob) -> JobResult:
    loaded = _load(ctx, job)
    per_dataset = [_fits(job, X.shape[1]) for _, _, X, _ in loaded]
    total = sum(per_dataset)
    ctx.reporter.report(0.0, f"{len(loaded)} data set(s), {total} fits")
    t0 = time.perf_counter()
    out: list[tuple[int, str, dict[str, Any]]] = []
    # one connection to the Dask cluster (if set) for all the data sets' cells
    with dask_cluster(ctx.settings.dask_scheduler):
        for k, (dataset_id, name, X, y) in enumerate(loaded):
            base = sum(per_dataset[:k])

            def progress(done: int, _n: int, base: int = base, k: int = k, name: str = name
                         ) -> None:
                ctx.reporter.tick((base + done) / total,
                                  f"dataset {k + 1}/{len(loaded)} ({name}): fit {base + done}/"
                                  f"{total}")

            result = run_experiment(
                X, y, algorithms=list(job.algorithms), kernel=job.kernel, splits=job.splits,
                test_size=job.test_size, grid=job.grid, cv=job.cv, random_state=job.seed,
                n_jobs=ctx.settings.search_jobs, scaling=job.scaling, callback=progress,
                params=job.params or None, dataset=name,
            )
            out.append((dataset_id, name, jsonable(result.to_dict())))
    return _stored(ctx, job, out, time.perf_counter() - t0)


def _stored(ctx: JobContext, job: ExperimentJob, out: list[tuple[int, str, dict[str, Any]]],
            seconds: float) -> JobResult:
    """The result rows and the job's summary."""
    summary = {
        "datasets": [
            {
                "dataset_id": dataset_id,
                "name": name,
                "mean_accuracy": {a: rec["mean"] for a, rec in res["algorithms"].items()},
                "outcomes": {a: c["outcome"] for a, c in res["comparisons"].items()},
            }
            for dataset_id, name, res in out
        ],
        "seconds": seconds,
    }

    def write(session: Session) -> dict[str, Any]:
        session.add_all(
            ExperimentResult(
                job_id=ctx.job_id, position=i, dataset_id=dataset_id, name=name, result=res
            )
            for i, (dataset_id, name, res) in enumerate(out)
        )
        return {"result": summary}

    return JobResult(
        write=write,
        message=f"{len(out)} data set(s) × {job.splits} split(s) done in {seconds:.1f} s",
    )


EXPERIMENT = JobKind("experiment", ExperimentJob, run_experiment_job)
