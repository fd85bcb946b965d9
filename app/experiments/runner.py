"""The worker's runner for ``experiment`` jobs (registered in ``app.jobs.registry``): load the
data sets, run ``solver.experiments.run_experiment`` on each with progress reports, and store
one ``ExperimentResult`` row per data set."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from app.core.jsonable import jsonable
from app.core.orm import ExperimentResult
from app.datasets import service as datasets
from app.jobs.runtime import JobContext, JobResult


def _row_names(names: list[str], ids: list[int]) -> list[str]:
    """Table row names: the data sets' names, with the id added where names repeat."""
    return [
        f"{name} (#{i})" if names.count(name) > 1 else name
        for name, i in zip(names, ids, strict=True)
    ]


def run_experiment_job(ctx: JobContext) -> JobResult:
    import numpy as np

    from solver.experiments import run_experiment
    from solver.model_selection import n_cells
    from solver.parallel import dask_cluster

    p = ctx.params
    loaded = []
    with ctx.sessions() as session:
        for dataset_id in p["dataset_ids"]:
            dataset = datasets.get(session, dataset_id)
            if dataset is None:
                raise ValueError(f"dataset {dataset_id} no longer exists")
            X, y = datasets.load_arrays(session, dataset)
            loaded.append((dataset.id, dataset.name, X, np.asarray(y)))
    names = _row_names([name for _, name, _, _ in loaded], [i for i, _, _, _ in loaded])
    grid = p["grid"]
    algos = list(p["algorithms"])

    def grid_of(a: str) -> Any:
        if isinstance(grid, dict):
            return grid.get(a, "quick")
        return grid

    per_dataset = [
        p["splits"]
        * sum(
            n_cells(a, X.shape[1], kernel=p["kernel"], grid=grid_of(a), cv=p["cv"]) + 1
            for a in algos
        )
        for _, _, X, _ in loaded
    ]
    total = sum(per_dataset)
    ctx.reporter.report(0.0, f"{len(loaded)} data set(s), {total} fits")
    t0 = time.perf_counter()
    out: list[tuple[int, str, dict[str, Any]]] = []
    # one connection to the Dask cluster (if set) for all the data sets' cells
    with dask_cluster(ctx.settings.dask_scheduler):
        for k, ((dataset_id, _, X, y), name) in enumerate(zip(loaded, names, strict=True)):
            base = sum(per_dataset[:k])

            def progress(
                done: int, _n: int, base: int = base, k: int = k, name: str = name
            ) -> None:
                ctx.reporter.tick(
                    (base + done) / total,
                    f"dataset {k + 1}/{len(loaded)} ({name}): fit {base + done}/{total}",
                )

            result = run_experiment(
                X,
                y,
                algorithms=algos,
                kernel=p["kernel"],
                splits=p["splits"],
                test_size=p["test_size"],
                grid=grid,
                cv=p["cv"],
                random_state=p["seed"],
                n_jobs=ctx.settings.search_jobs,
                scaling=p.get("scaling", "train"),
                callback=progress,
                params=p.get("params") or None,
                dataset=name,
            )
            out.append((dataset_id, name, jsonable(result.to_dict())))
    seconds = time.perf_counter() - t0
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
        message=f"{len(out)} data set(s) × {p['splits']} split(s) done in {seconds:.1f} s",
    )
