"""Benchmark: scale-out of searches and experiments, local processes vs a Dask cluster.

    .venv/bin/python bench/scale.py                     # both workloads (../shared/datasets)
    .venv/bin/python bench/scale.py --only search       # a9a paper grid only
    .venv/bin/python bench/scale.py --only experiment --splits 10

Workloads:

* **search**: the paper grid (11 x 11 alpha, beta) for linear MSVMAv on a9a (32 561 x 123),
  5-fold cross-validation, max_iter=100, tol=1e-8 (605 cells);
* **experiment**: the protocol with the quick grids, ``--splits`` splits, 5 folds, over three
  shared data sets (wdbc, diabetes, qsar-biodeg) and ``--algorithms``.

Each runs locally with 1 process (the anchor) and 2 joblib processes, then on a
``distributed.LocalCluster`` of 2 single-threaded worker processes on 127.0.0.1 (started once,
before the timings; its workers are warmed with one small search). Printed: wall time,
speed-up against the anchor measured in the same run, the Dask overhead per cell
((Dask wall - 2-process wall) x 2 / cells: the worker-seconds a cell costs more on Dask) and the
round trip of an empty task. The tables of every run are checked to be identical.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# This file is named like nothing in the package, but keep the folder off the path anyway.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from app.ingest import parse_dataset  # noqa: E402
from solver.experiments import run_experiment  # noqa: E402
from solver.model_selection import cross_validate_grid, n_cells  # noqa: E402
from solver.parallel import dask_cluster  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
EXPERIMENT_FILES = {"wdbc": ("wdbc.arff", {}), "diabetes": ("diabetes.arff", {}),
                    "biodeg": ("qsar-biodeg.arff", {})}


def _load(folder: Path, name: str, **options):
    path = folder / name
    if not path.is_file():
        raise SystemExit(f"{path}: not found (pass --data DIR, the shared datasets folder)")
    parsed = parse_dataset(path.read_bytes(), path.name, **options)
    return parsed.X, np.asarray(parsed.y)


def _search(X, y, n_jobs):
    res = cross_validate_grid("msvmav", X, y, grid="paper", cv=5, random_state=0,
                              n_jobs=n_jobs, params={"max_iter": 100, "tol": 1e-8})
    return [(r["params"], r["scores"]) for r in res.table]


def _experiment(data, algorithms, splits, n_jobs):
    out = {}
    for name, (X, y) in data.items():
        res = run_experiment(X, y, algorithms=algorithms, splits=splits, grid="quick", cv=5,
                             n_jobs=n_jobs, dataset=name).to_dict()
        out[name] = {a: (rec["accuracies"], rec["params"]) for a, rec in
                     res["algorithms"].items()}
    return out


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _noop() -> None:
    return None


def _round_trip(client, k: int = 50) -> float:
    times = []
    for _ in range(k):
        t = time.perf_counter()
        client.submit(_noop, pure=False).result()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _report(title: str, cells: int, rows: list[tuple[str, float]]) -> None:
    anchor = rows[0][1]
    print(f"\n{title}: {cells} cells")
    print("| run | wall s | speed-up vs 1 process |")
    print("|---|---|---|")
    for label, wall in rows:
        print(f"| {label} | {wall:.1f} | x{anchor / wall:.2f} |")
    local2, dask2 = rows[1][1], rows[2][1]
    print(f"Dask overhead per cell: {(dask2 - local2) * 2 / cells * 1e3:+.1f} ms "
          f"(worker time; wall {dask2 - local2:+.1f} s over 2 local processes)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["search", "experiment"])
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--algorithms", default="msvmav,svm,svr,lssvm,odm,mamc,fmm")
    ap.add_argument("--data", type=Path, default=DATA, help="the shared datasets folder")
    args = ap.parse_args(argv)
    folder = args.data
    from distributed import Client, LocalCluster

    algorithms = args.algorithms.split(",")
    print("load average at start (1, 5, 15 min):", _load_average())
    cluster = LocalCluster(processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address=":0", silence_logs=40)
    try:
        with Client(cluster.scheduler_address, set_as_default=False) as client:
            print(f"LocalCluster: 2 workers x 1 thread; empty task round trip "
                  f"{_round_trip(client) * 1e3:.1f} ms (median of 50)")
        Xs, ys = _load(folder, "wdbc.arff")
        with dask_cluster(cluster.scheduler_address):  # warm the workers' imports
            cross_validate_grid("msvmav", Xs, ys, grid="quick", cv=2)
        if args.only in (None, "search"):
            X, y = _load(folder, "a9a", n_features=123)
            rows, tables = [], []
            for label, n_jobs, remote in (("local, 1 process", 1, False),
                                          ("local, 2 processes (joblib/loky)", 2, False),
                                          ("LocalCluster, 2 workers x 1 thread", None, True)):
                with dask_cluster(cluster.scheduler_address if remote else None):
                    wall, table = _timed(lambda n_jobs=n_jobs: _search(X, y, n_jobs))
                rows.append((label, wall))
                tables.append(table)
                print(f"  {label}: {wall:.1f} s", flush=True)
            _report("a9a, linear MSVMAv, paper grid, 5 folds", n_cells("msvmav", 123,
                    grid="paper", cv=5), rows)
            print("tables identical:", all(t == tables[0] for t in tables))
        if args.only in (None, "experiment"):
            data = {k: _load(folder, f, **o) for k, (f, o) in EXPERIMENT_FILES.items()}
            cells = sum(args.splits * sum(n_cells(a, X.shape[1], grid="quick", cv=5) + 1
                                          for a in algorithms) for X, _ in data.values())
            rows, results = [], []
            for label, n_jobs, remote in (("local, 1 process", 1, False),
                                          ("local, 2 processes (joblib/loky)", 2, False),
                                          ("LocalCluster, 2 workers x 1 thread", None, True)):
                with dask_cluster(cluster.scheduler_address if remote else None):
                    wall, res = _timed(lambda n_jobs=n_jobs: _experiment(
                        data, algorithms, args.splits, n_jobs))
                rows.append((label, wall))
                results.append(res)
                print(f"  {label}: {wall:.1f} s", flush=True)
            _report(f"experiment, {args.splits} splits, quick grids, 5 folds, "
                    f"{len(algorithms)} algorithms x {', '.join(data)}", cells, rows)
            print("results identical:", all(r == results[0] for r in results))
    finally:
        cluster.close()
    print("load average at the end (1, 5, 15 min):", _load_average())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
