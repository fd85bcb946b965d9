"""Benchmark: RBF MSVMAv on a Dask cluster over Parquet files (issue 46's Done-when, scaled).

    .venv/bin/python bench/cluster_kernel.py                          # 100k and 1M rows
    .venv/bin/python bench/cluster_kernel.py --rows 20000 200000      # a quick run

For each size N: a synthetic N x 28 dataset with a non-linear boundary (uniform in [0, 1)^28,
label ||x - 0.5||^2 < 28/12, 5 % flipped: no linear rule beats the majority) is written as
Parquet files of ``--file-rows`` rows into a temporary directory; each file is read on the
Dask worker that holds its block (a reader graph, as the service reads a dataset by
reference). On a LocalCluster of ``--workers`` processes of one thread with ``--memory-limit``
each, printed:

* the RBF fit (``fit_on_cluster``, ``approximation="low_rank"``, ``n_components`` capped by
  the workers' memory) and the linear cluster fit: time, iterations, rank, and accuracy on
  ``--held-out`` rows of the same rule, scored here;
* the training summary (``cluster_margin_statistics``): time; the bench process's peak of
  traced allocations (tracemalloc) over the fit and the summary, the "service process" whose
  memory must not grow with N;
* on the first size: every quantile's rank among the exact margins (gathered here, for the
  check only) against the sketch's stated rank error;
* the ratio of the RBF fit's time between the last and the first size.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# bench/solver.py would shadow the solver package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

D = 28
FLIP = 0.05
PARAMS = {"kernel": "rbf", "gamma": 0.05, "alpha": 1.0, "beta": 1 / 64,
          "approximation": "low_rank", "kernel_tol": 1e-3, "random_state": 0}


def rows_of(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    X = rng.random((n, D))
    y = (((X - 0.5) ** 2).sum(axis=1) < D / 12).astype(np.int8)
    flip = rng.random(n) < FLIP
    y[flip] = 1 - y[flip]
    return X, y


def write_parquet(directory: Path, n: int, file_rows: int, seed: int) -> list[tuple[str, int]]:
    """The dataset in files of ``file_rows`` rows (generated file by file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = []
    for k, start in enumerate(range(0, n, file_rows)):
        m = min(file_rows, n - start)
        X, y = rows_of(np.random.default_rng([seed, k]), m)
        table = pa.table({**{f"x{j}": X[:, j] for j in range(D)}, "label": y})
        path = directory / f"part-{k:05d}.parquet"
        pq.write_table(table, path)
        files.append((str(path), m))
    return files


def read_file(path: str) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    X = np.column_stack([table.column(f"x{j}").to_numpy() for j in range(D)])
    return X, table.column("label").to_numpy()


def dask_arrays(files: list[tuple[str, int]]):
    import dask
    import dask.array as da

    xs, ys = [], []
    for path, m in files:
        part = dask.delayed(read_file, pure=True, nout=2)(path)
        xs.append(da.from_delayed(part[0], shape=(m, D), dtype=np.float64))
        ys.append(da.from_delayed(part[1], shape=(m,), dtype=np.int8))
    return da.concatenate(xs), da.concatenate(ys)


def timed_fit(client, est, X, y, traced: bool = False):
    from solver.distributed import cluster_margin_statistics, fit_on_cluster

    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    est = fit_on_cluster(est, X, y, client=client)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    summary = cluster_margin_statistics(est, X, y, client=client)
    summary_s = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    if traced:
        tracemalloc.stop()
    return est, fit_s, summary_s, peak, summary


def quantile_check(est, files, summary) -> None:
    X = np.concatenate([read_file(p)[0] for p, _ in files])
    y = np.concatenate([read_file(p)[1] for p, _ in files])
    m = np.sort(est._margins_of(est.decision_function(X), y))
    eps = summary["quantile_rank_error"]
    worst = 0.0
    for level, value in summary["quantiles"].items():
        lo = np.searchsorted(m, value, side="left") / m.size
        hi = np.searchsorted(m, value, side="right") / m.size
        q = int(level) / 100
        worst = max(worst, 0.0 if lo <= q <= hi else min(abs(lo - q), abs(hi - q)))
    print(f"   quantiles: largest rank error {worst:.5f} against the sketch's stated "
          f"{eps:.5f} ({'within' if worst <= eps else 'OUTSIDE'})", flush=True)


def run_size(client, args, n: int, first: bool, held: tuple) -> float:
    from solver import MSVMAv
    from solver.distributed._kernel import largest_rank

    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        files = write_parquet(Path(tmp), n, args.file_rows, seed=n)
        X, y = dask_arrays(files)
        size = n * D * 8
        rank = min(args.rank, largest_rank(-(-n // args.workers), args.limit_bytes, D))
        print(f"-- N = {n:,}: {len(files)} files, data {size / 2**20:.0f} MiB; rank "
              f"{rank} (asked {args.rank}, workers' memory cap)", flush=True)
        est, fit_s, sum_s, peak, summary = timed_fit(
            client, MSVMAv(**PARAMS, n_components=rank, max_iter=args.max_iter), X, y,
            traced=True)
        acc = est.score(*held)
        print(f"   rbf: fit {fit_s:.1f} s ({est.n_iter_} iterations, rank {est.rank_}, "
              f"trace error {est.kernel_error_:.3g}), summary {sum_s:.1f} s, hold-out "
              f"accuracy {acc:.4f}; bench process peak traced {peak / 2**20:.1f} MiB",
              flush=True)
        lin, lfit, lsum, _, _ = timed_fit(client, MSVMAv(max_iter=args.max_iter), X, y)
        print(f"   linear: fit {lfit:.1f} s, summary {lsum:.1f} s, hold-out accuracy "
              f"{lin.score(*held):.4f}", flush=True)
        if first:
            quantile_check(est, files, summary)
    return fit_s


def _warm() -> None:
    import solver.distributed._kernel  # noqa: F401 - the workers' imports, outside the timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--file-rows", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--rank", type=int, default=300)
    parser.add_argument("--max-iter", type=int, default=30)
    parser.add_argument("--held-out", type=int, default=100_000)
    parser.add_argument("--tmp", default=None, help="where the Parquet files are written")
    args = parser.parse_args()
    import dask
    from dask.utils import parse_bytes
    from distributed import Client, LocalCluster

    warnings.simplefilter("ignore")
    args.limit_bytes = parse_bytes(args.memory_limit)
    held = rows_of(np.random.default_rng(12345), args.held_out)
    print(f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}; {args.workers} workers x 1 "
          f"thread, memory limit {args.memory_limit} each; max_iter {args.max_iter}",
          flush=True)
    with dask.config.set({"distributed.worker.memory.target": False,
                          "distributed.worker.memory.spill": False}), \
            LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                         memory_limit=args.memory_limit, host="127.0.0.1",
                         dashboard_address=":0") as local, Client(local) as client:
        client.run(_warm)
        times = [run_size(client, args, n, k == 0, held) for k, n in enumerate(args.rows)]
    print(f"rbf fit time {args.rows[-1]:,} / {args.rows[0]:,} rows: "
          f"{times[-1] / times[0]:.2f}x for {args.rows[-1] / args.rows[0]:.0f}x rows; load "
          f"{os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
