"""Benchmark: where a streamed pass of the RBF cluster fit spends its time (issue 46).

    .venv/bin/python bench/cluster_pass.py --data /tmp/h46data --rows 1000000 --rank 30

On a LocalCluster of two one-thread worker processes, the N-row dataset of
bench/cluster_kernel.py (``--data``/n<N>/, written there by it or here, files of
``--file-rows`` rows) is streamed (``keep="nothing"``: every pass reads each file, prepares and
maps it to its rank-``--rank`` features in the task that uses it), and ``--passes`` passes of
the iteration's reduce (``_blocks.gram_stats``) run. For each pass: its wall time, the CPU
seconds the two workers and this process (driver and scheduler) spent in it (psutil), its task
count and the task stream's compute time by task prefix. Odd passes map each block with the
candidate fused map phi(X) R = k(X_P, X)^T (L_PP^{-T} R) (one product instead of the
triangular solve and the rotation; patched into the workers, not the library's path), even
ones with the library's ``_kernel_blocks.mapped``: the two alternate in one run on the same
files.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
sys.path.append(str(Path(__file__).resolve().parent))

import cluster_kernel as ck  # noqa: E402 - bench/ after the project root


def _cpu() -> float:
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def _fused(part: tuple, landmarks, rotation: np.ndarray) -> tuple:
    from scipy import linalg

    from solver.kernels import kernel_matrix

    X, y = part
    M = linalg.solve_triangular(landmarks.block, rotation, lower=True, trans="T",
                                check_finite=False)
    return np.ascontiguousarray(kernel_matrix(landmarks.rows, X, **landmarks.args).T @ M), y


def _use(fused: bool) -> None:
    from solver.internals import cluster_kernel_blocks as kb

    if not hasattr(kb, "_library_mapped"):
        kb._library_mapped = kb.mapped
    kb.mapped = _fused if fused else kb._library_mapped


def streamed_features(client, files: list, rank: int):
    """The files streamed and mapped on every pass with a rank-``rank`` RBF map (landmarks:
    pivoted Cholesky of the first file's first 10,000 rows)."""
    from solver.internals import cluster_blocks as _blocks
    from solver.internals import cluster_kernel as _kernel
    from solver.internals import cluster_kernel_blocks as _kernel_blocks
    from solver.internals import cluster_rows
    from solver.low_rank import pivoted_cholesky

    X, y = ck.dask_arrays(files)
    rows = cluster_rows.ClusterRows.stream(client, X, y, False)
    sample = ck.read_file(files[0][0])[0][:10_000]
    args = {"kernel": "rbf", "gamma": 0.05, "degree": 3, "coef0": 1.0}
    factor = pivoted_cholesky(sample, **args, tol=0, max_rank=rank, random_state=0)
    landmarks = _kernel_blocks.Landmarks(sample[factor.pivots], factor.pivot_block(), args)
    held = client.submit(_blocks.identity, landmarks, pure=False)
    lam, _, R, _ = _kernel.feature_rotation(rows, held)
    turn = client.submit(_blocks.identity, R, pure=False)
    return _kernel.PerPassFeatures(rows, held, turn, int(lam.size))


def by_prefix(stream: list) -> dict:
    """{task prefix: (compute seconds, tasks)} of a task stream."""
    seconds, count = defaultdict(float), defaultdict(int)
    for task in stream:
        key = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        prefix = str(key).split("-")[0]
        count[prefix] += 1
        seconds[prefix] += sum(s["stop"] - s["start"] for s in task["startstops"]
                               if s["action"] == "compute")
    return {p: (seconds[p], count[p]) for p in sorted(seconds, key=lambda p: -seconds[p])}


def one_pass(client, features, w: np.ndarray) -> dict:
    from distributed import get_task_stream

    from solver.internals import cluster_blocks as _blocks

    before, mine, start = client.run(_cpu), _cpu(), time.perf_counter()
    with get_task_stream(client) as stream:
        features.reduce(_blocks.gram_stats, blocks=features.names, positive=1, w=w,
                        theta=1.0)
    wall = time.perf_counter() - start
    after = client.run(_cpu)
    return {"wall": wall, "workers": sum(after[k] - before[k] for k in before),
            "driver": _cpu() - mine, "tasks": by_prefix(stream.data)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--file-rows", type=int, default=100_000)
    parser.add_argument("--rank", type=int, default=30)
    parser.add_argument("--passes", type=int, default=6)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    files = ck.dataset_files(args, args.rows)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="2GiB",
                      host="127.0.0.1", dashboard_address=":0") as local, \
            Client(local) as client:
        client.run(ck._warm)
        features = streamed_features(client, files, args.rank)
        w = np.random.default_rng(0).standard_normal(features.D) * 0.01
        print(f"N {args.rows:,}, {features.blocks} blocks, rank {features.D}; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        for k in range(args.passes):
            client.run(_use, bool(k % 2))
            out = one_pass(client, features, w * (1 + k))
            tasks = ", ".join(f"{p} {s:.2f} s/{c}" for p, (s, c) in out["tasks"].items())
            print(f" pass {k} ({'fused map' if k % 2 else 'library map'}): wall "
                  f"{out['wall']:.2f} s, workers' CPU {out['workers']:.2f} s, driver + "
                  f"scheduler CPU {out['driver']:.2f} s, {sum(c for _, c in out['tasks'].values())}"
                  f" tasks; compute by prefix: {tasks}; load {os.getloadavg()[0]:.1f}",
                  flush=True)
        features.release()


if __name__ == "__main__":
    main()
