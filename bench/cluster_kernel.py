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
* the ratio of the RBF fit's time between each size and the one before (at most 12x), and of
  the bench process's peak;
* the workers' peak resident set size (psutil, sampled every second) against their limit;
* with ``--kill``, on the first size: the RBF fit again with a worker SIGKILLed at iteration
  3, its decisions against the undisturbed fit's and the scheduler's tasks left after it;
* with ``--copy``: a ``--copy-rows`` copy of magic04's training part (80 %, min-max scaled):
  rows drawn with replacement, each feature moved by Gaussian noise of ``--copy-jitter`` times
  its standard deviation (clipped to [0, 1]), so that copies of a row differ, in ``--copy-files``
  uncompressed Parquet files read on the workers, fitted with ``--keep``: the sigmoid-calibrated
  RBF cluster fit (gamma 10, rank ``--copy-rank``) against the local fit on its landmarks (1e-9,
  over the test part and the copy), the test part's log loss of each ``--copy-calibration``
  (sigmoid, isotonic) cluster calibration against the local calibration of the same rows
  (within 5 %), ``cluster_evaluation`` of the test part as 4 partitions, and the linear cluster
  fit's test accuracy (alpha 64, beta 1), with each fit's time.

``--data DIR`` keeps the generated files between runs (DIR/n<N>/); ``--chunk-rows`` splits the
files into the fit's blocks; ``--keep nothing`` reads and maps every partition on every pass.

``--scheduler process`` runs the Dask scheduler and the workers as processes of their own
(``dask scheduler``, ``dask worker --nworkers``), as a deployment does, instead of a
LocalCluster whose scheduler lives in this process: the bench process is then the service's
role alone (the driver), and its peak RSS and traced allocations are the driver's, not the
scheduler's task state (which grows with the number of tasks). Run one size a process
(``--rows 1000000``, then ``--rows 10000000``) to compare peak RSS: a resident set does not
shrink after a first size.
"""

from __future__ import annotations

import argparse
import contextlib
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
#: sizes whose margins are gathered here (for the quantiles' check only)
QUANTILE_CHECK_ROWS = 1_000_000
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
        pq.write_table(table, path, compression="none")  # (a pass's read: no decoding)
        files.append((str(path), m))
    return files


def read_file(path: str) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, use_threads=False)
    names = [name for name in table.column_names if name != "label"]
    X = np.column_stack([table.column(name).to_numpy() for name in names])
    return X, table.column("label").to_numpy()


def dask_arrays(files: list[tuple[str, int]], chunk_rows: int | None = None, d: int = D):
    """A reader graph over the files; ``chunk_rows``: each file's rows in blocks of that many
    (the fit's blocks; a worker maps one at a time when its features are not kept)."""
    import dask
    import dask.array as da

    xs, ys = [], []
    for path, m in files:
        part = dask.delayed(read_file, pure=True, nout=2)(path)
        xs.append(da.from_delayed(part[0], shape=(m, d), dtype=np.float64))
        ys.append(da.from_delayed(part[1], shape=(m,), dtype=np.int8))
    X, y = da.concatenate(xs), da.concatenate(ys)
    if chunk_rows:
        X, y = X.rechunk((chunk_rows, d)), y.rechunk(chunk_rows)
    return X, y


def dataset_files(args, n: int) -> list[tuple[str, int]]:
    """The N-row dataset's files in ``--data``/n{N} (written there once, reused after)."""
    import pyarrow.parquet as pq

    directory = Path(args.data) / f"n{n}"
    if not (directory / "DONE").exists():
        directory.mkdir(parents=True, exist_ok=True)
        files = write_parquet(directory, n, args.file_rows, seed=n)
        (directory / "DONE").write_text(str(len(files)))
    paths = sorted(str(p) for p in directory.glob("part-*.parquet"))
    return [(path, pq.ParquetFile(path).metadata.num_rows) for path in paths]


class WorkerMemory:
    """The workers' and this process's largest resident set size (psutil, sampled every
    second by a thread) while a block of code runs."""

    def __init__(self, client) -> None:
        self.client, self.peak, self._stop = client, {}, None
        self.own = 0

    def __enter__(self):
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while True:
            self.own = max(self.own, me.memory_info().rss)
            if self._stop.wait(1.0):
                return
            try:
                for worker, rss in self.client.run(_rss).items():
                    self.peak[worker] = max(self.peak.get(worker, 0), rss)
            except Exception:  # a worker gone between two samples
                continue

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def largest(self) -> int:
        return max(self.peak.values(), default=0)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def timed_fit(client, est, X, y, traced: bool = False, keep="auto", callback=None):
    """(the fitted model, fit seconds, summary seconds, this process's traced peak bytes,
    the workers' peak RSS, the summary, this process's peak RSS, worker processes
    restarted)."""
    from solver.distributed import cluster_margin_statistics, fit_on_cluster

    extra = {"keep": keep}
    pids = set(client.run(os.getpid).values())
    if traced:
        tracemalloc.start()
    with WorkerMemory(client) as memory:
        start = time.perf_counter()
        est = fit_on_cluster(est, X, y, client=client, callback=callback, **extra)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        summary = cluster_margin_statistics(est, X, y, client=client)
        summary_s = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    if traced:
        tracemalloc.stop()
    restarted = len(pids - set(client.run(os.getpid).values()))
    return est, fit_s, summary_s, peak, memory.largest(), summary, memory.own, restarted


def quantile_check(est, files, summary) -> float:
    """Every quantile's rank among the exact margins (computed here file by file)."""
    margins = []
    for path, _ in files:
        X, y = read_file(path)
        margins.append(est._margins_of(est.decision_function(X), y))
    m = np.sort(np.concatenate(margins))
    eps = summary["quantile_rank_error"]
    worst = 0.0
    for level, value in summary["quantiles"].items():
        lo = np.searchsorted(m, value, side="left") / m.size
        hi = np.searchsorted(m, value, side="right") / m.size
        q = int(level) / 100
        worst = max(worst, 0.0 if lo <= q <= hi else min(abs(lo - q), abs(hi - q)))
    print(f"   quantiles ({m.size:,} margins): largest rank error {worst:.5f} against the "
          f"sketch's stated {eps:.5f} ({'within' if worst <= eps else 'OUTSIDE'})", flush=True)
    return worst


def _outstanding(dask_scheduler) -> list:
    """(key prefix, state) of the tasks the scheduler still means to run or holds."""
    return sorted({(str(key).split("-")[0], ts.state)
                   for key, ts in dask_scheduler.tasks.items()
                   if ts.state in ("processing", "queued", "waiting", "no-worker", "memory")})


def kill_check(client, args, X, y, rank: int, reference, held: tuple) -> None:
    """The RBF fit again, one worker SIGKILLed at iteration 3's record: its decisions
    against the undisturbed fit's, and the scheduler's tasks left afterwards."""
    import signal

    from solver import MSVMAv

    pids = client.run(os.getpid)
    victim = next(iter(pids))
    state = {}

    def kill(info):
        if info.get("stage") is None and info.get("iteration") == 3 and not state:
            state["killed"] = time.perf_counter()
            os.kill(pids[victim], signal.SIGKILL)

    start = time.perf_counter()
    est = fit_on_killed(client, MSVMAv(**PARAMS, n_components=rank, max_iter=args.max_iter),
                        X, y, reference.fit_info_["cluster"]["keep"], kill)
    seconds = time.perf_counter() - start
    a, b = reference.decision_function(held[0]), est.decision_function(held[0])
    diff = float(np.max(np.abs(a - b)) / np.max(np.abs(a)))
    deadline = time.monotonic() + 60
    left = client.run_on_scheduler(_outstanding)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = client.run_on_scheduler(_outstanding)
    print(f"   SIGKILL of worker pid {pids[victim]} at iteration 3: fit {seconds:.1f} s, "
          f"{'killed' if state else 'NOT killed'}; decisions vs the undisturbed fit: largest "
          f"relative difference {diff:.2e} ({'within' if diff <= 1e-9 else 'OUTSIDE'} 1e-9); "
          f"scheduler tasks left {left}", flush=True)


def fit_on_killed(client, est, X, y, keep, callback):
    from solver.distributed import fit_on_cluster

    return fit_on_cluster(est, X, y, client=client, callback=callback, keep=keep)


def rbf_run(client, args, X, y, held: tuple, keep: str) -> dict:
    """The RBF fit and its summary, with the given ``keep``."""
    from solver import MSVMAv

    load = os.getloadavg()[0]
    est, fit_s, sum_s, peak, wpeak, summary, own, restarted = timed_fit(
        client, MSVMAv(**PARAMS, n_components=args.rank, max_iter=args.max_iter), X, y,
        traced=True, keep=keep)
    acc = est.score(*held)
    plan = est.fit_info_["cluster"]
    limit = plan["limit_mib"] * 2**20
    print(f"   rbf (keep {keep!r} -> {plan['keep']!r}): fit {fit_s:.1f} s ({est.n_iter_} "
          f"iterations, {plan['passes']} passes, rank {est.rank_}, trace error "
          f"{est.kernel_error_:.3g}), summary {sum_s:.1f} s, hold-out accuracy {acc:.4f}; "
          f"plan {plan}; service (bench) process peak RSS {own / 2**20:.0f} MiB, traced "
          f"{peak / 2**20:.1f} MiB; workers' peak RSS {wpeak / 2**20:.0f} MiB ("
          f"{wpeak / limit:.2f}x the limit; lowest threshold {plan['threshold']:g}); worker "
          f"processes restarted {restarted}; load {load:.1f} -> {os.getloadavg()[0]:.1f}",
          flush=True)
    return {"fit": fit_s, "peak": peak, "own": own, "acc": acc, "est": est,
            "summary": summary, "keep": plan["keep"]}


def run_size(client, args, n: int, first: bool, held: tuple) -> dict:
    from solver import MSVMAv

    tmp = None if args.data else tempfile.TemporaryDirectory(dir=args.tmp)
    try:
        if args.data:
            files = dataset_files(args, n)
        else:
            files = write_parquet(Path(tmp.name), n, args.file_rows, seed=n)
        X, y = dask_arrays(files, args.chunk_rows)
        size = n * D * 8
        print(f"-- N = {n:,}: {len(files)} files, {len(X.chunks[0])} blocks, data "
              f"{size / 2**20:.0f} MiB ({size / args.limit_bytes:.2f}x a worker's limit); "
              f"rank {args.rank}", flush=True)
        out = rbf_run(client, args, X, y, held, args.keep)
        if args.also_keep and n < max(args.rows):
            out["also"] = rbf_run(client, args, X, y, held, args.also_keep)
        lin, lfit, lsum, _, lpeak, _, _, lrestart = timed_fit(
            client, MSVMAv(max_iter=args.max_iter), X, y)
        lacc = lin.score(*held)
        print(f"   linear (keep -> {lin.fit_info_['cluster']['keep']!r}): fit {lfit:.1f} s, "
              f"summary {lsum:.1f} s, hold-out accuracy {lacc:.4f} (rbf - linear "
              f"{out['acc'] - lacc:+.4f}); workers' peak RSS {lpeak / 2**20:.0f} MiB; worker "
              f"processes restarted {lrestart}", flush=True)
        out["linear"] = lacc
        if "also" in out:
            out["also"]["linear"] = lacc
        if n <= QUANTILE_CHECK_ROWS:
            quantile_check(out["est"], files, out["summary"])
        if first and args.kill:
            kill_check(client, args, X, y, args.rank, out["est"], held)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return out


COPY_PARAMS = {"kernel": "rbf", "gamma": 10.0, "alpha": 1.0, "beta": 1 / 64,
               "approximation": "low_rank", "n_components": 200, "kernel_tol": 1e-3,
               "max_iter": 30, "random_state": 0}
#: the linear comparator: the best of alpha 64, 1024 x beta 1/64, 1 on magic's test part
#: (0.784; alpha 1, beta 1/64 gives 0.647, the majority class)
COPY_LINEAR = {"alpha": 64.0, "beta": 1.0, "max_iter": 30}


def magic_split(seed: int = 0):
    """magic04 (19,020 x 10, gamma/hadron) split 80/20, min-max scaled on the training part
    (the test part clipped to [0, 1]); labels 1 for "g"."""
    raw = np.genfromtxt(ROOT.parent / "shared" / "datasets" / "magic04.data", delimiter=",",
                        dtype=str)
    X, y = raw[:, :-1].astype(np.float64), (raw[:, -1] == "g").astype(np.int8)
    order = np.random.default_rng(seed).permutation(y.size)
    cut = int(0.8 * y.size)
    train, test = order[:cut], order[cut:]
    lo, hi = X[train].min(axis=0), X[train].max(axis=0)
    scale = np.where(hi > lo, hi - lo, 1.0)
    return ((X[train] - lo) / scale, y[train]), (np.clip((X[test] - lo) / scale, 0, 1),
                                                 y[test])


def copy_rows(X: np.ndarray, y: np.ndarray, rows: int,
              jitter: float) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` rows drawn with replacement from (X, y), each feature moved by Gaussian noise
    of ``jitter`` times its standard deviation and clipped to [0, 1] (no two rows equal)."""
    rng = np.random.default_rng(46)
    pick = rng.integers(0, y.size, rows)
    noise = rng.standard_normal((rows, X.shape[1])) * (jitter * X.std(axis=0))
    return np.clip(X[pick] + noise, 0.0, 1.0), y[pick]


def write_copy(directory: Path, Xc: np.ndarray, yc: np.ndarray,
               files: int) -> list[tuple[str, int]]:
    """(Xc, yc) in ``files`` uncompressed Parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for k, part in enumerate(np.array_split(np.arange(yc.size), files)):
        path = directory / f"part-{k:05d}.parquet"
        pq.write_table(pa.table({**{f"x{j}": Xc[part, j] for j in range(Xc.shape[1])},
                                 "label": yc[part]}), path, compression="none")
        out.append((str(path), part.size))
    return out


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def copy_equality(client, args, X, y, Xc, yc, test) -> dict:
    """The sigmoid-calibrated RBF cluster fit against the local fit on its landmarks."""
    from solver import MSVMAv
    from solver.distributed import fit_on_cluster, fit_on_landmarks

    remote, remote_s = _timed(fit_on_cluster, MSVMAv(**COPY_PARAMS, calibration="sigmoid"),
                              X, y, client=client, keep=args.keep)
    local, local_s = _timed(fit_on_landmarks, MSVMAv(**COPY_PARAMS), Xc, yc, remote.X_fit_,
                            remote.landmark_block_)
    worst = 0.0
    for rows in (test[0], Xc):
        a, b = local.decision_function(rows), remote.decision_function(rows)
        worst = max(worst, float(np.max(np.abs(a - b)) / np.max(np.abs(a))))
    plan = remote.fit_info_["cluster"]
    print(f"   rbf on the cluster, calibrated (sigmoid): {remote_s:.1f} s (6 cluster fits: 5 "
          f"folds + the model), rank {remote.rank_}, {remote.n_iter_} iterations, keep "
          f"{plan['keep']!r}, {plan['passes']} passes of the model's fit; the local fit on its "
          f"landmarks {local_s:.1f} s: largest |f_cluster - f_local| / max |f_local| over the "
          f"test part and the 200k rows {worst:.2e} ({'within' if worst <= 1e-9 else 'OUTSIDE'}"
          f" 1e-9); load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"   plan {plan}", flush=True)
    return {"sigmoid": remote, "diff": worst, "seconds": remote_s}


def copy_calibration(client, args, X, y, Xc, yc, test, models: dict) -> None:
    """Each calibration's log loss on the test part: the cluster's against the local one's."""
    from sklearn.metrics import log_loss

    from solver import MSVMAv
    from solver.distributed import fit_on_cluster

    for method in args.copy_calibration:
        remote = models.get(method)
        if remote is None:
            remote, models[method + "_s"] = _timed(
                fit_on_cluster, MSVMAv(**COPY_PARAMS, calibration=method), X, y,
                client=client, keep=args.keep)
        else:
            models[method + "_s"] = models["seconds"]
        here, here_s = _timed(MSVMAv(**COPY_PARAMS, calibration=method).fit, Xc, yc)
        ll_remote = log_loss(test[1], remote.predict_proba(test[0]))
        ll_here = log_loss(test[1], here.predict_proba(test[0]))
        print(f"   {method}: test log loss cluster {ll_remote:.4f} ({models[method + '_s']:.1f} "
              f"s), local {ll_here:.4f} ({here_s:.1f} s, rows in 5 folds): ratio "
              f"{ll_remote / ll_here:.4f} ({'within' if ll_remote <= 1.05 * ll_here else 'OUTSIDE'}"
              f" 5 %); accuracy cluster {remote.score(*test):.4f}, local {here.score(*test):.4f}"
              f"; load {os.getloadavg()[0]:.1f}", flush=True)
        models[method] = remote


def copy_run(client, args) -> None:
    """The 200k-row copy of magic's training part on the cluster: the RBF fit against the
    local fit on its landmarks; its calibrated probabilities' log loss against the local
    calibration's; the cluster's evaluation of the test part as partitions; the linear
    cluster fit's accuracy."""
    from solver import MSVMAv
    from solver.distributed import cluster_evaluation, fit_on_cluster

    (Xtr, ytr), test = magic_split()
    COPY_PARAMS["n_components"] = args.copy_rank
    Xc, yc = copy_rows(Xtr, ytr, args.copy_rows, args.copy_jitter)
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        files = write_copy(Path(tmp), Xc, yc, args.copy_files)
        X, y = dask_arrays(files, d=Xtr.shape[1])
        size = Xc.nbytes + yc.nbytes
        print(f"-- magic copy: {args.copy_rows:,} rows drawn with replacement from {ytr.size:,} "
              f"training rows, jitter {args.copy_jitter:g} x each feature's std (clipped to "
              f"[0, 1]), {len(files)} files, {size / 2**20:.1f} MiB; test part {test[1].size:,} "
              f"rows; keep {args.keep!r}; workers' limit {args.memory_limit}", flush=True)
        models = copy_equality(client, args, X, y, Xc, yc, test)
        copy_calibration(client, args, X, y, Xc, yc, test, models)
        Xt, yt = dask_arrays_of(*test, 4)
        ev = cluster_evaluation(models["sigmoid"], Xt, yt, client=client)
        lin, lin_s = _timed(fit_on_cluster, MSVMAv(**COPY_LINEAR), X, y, client=client,
                            keep=args.keep)
        rbf_acc, lin_acc = models["sigmoid"].score(*test), lin.score(*test)
        print(f"   the test part as 4 partitions, on the cluster (sigmoid model): accuracy "
              f"{ev['accuracy']:.4f}, log loss {ev['log_loss']:.4f}, Brier "
              f"{ev['brier_score']:.4f}; linear cluster fit ({COPY_LINEAR}) {lin_s:.1f} s: "
              f"test accuracy {lin_acc:.4f}; rbf {rbf_acc:.4f} (rbf - linear "
              f"{rbf_acc - lin_acc:+.4f}); load {os.getloadavg()[0]:.1f}", flush=True)


def dask_arrays_of(X: np.ndarray, y: np.ndarray, parts: int):
    import dask.array as da

    rows = -(-y.size // parts)
    return da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=rows)


@contextlib.contextmanager
def separate_processes(args):
    """A ``dask scheduler`` process and a ``dask worker`` process of ``--workers`` nannies (one
    thread, ``--memory-limit`` each), this directory and the project root on their path;
    yields the scheduler's address."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "bench")])}
    if args.dask_memory == "off":
        env.update({f"DASK_DISTRIBUTED__WORKER__MEMORY__{k.upper()}": "False"
                    for k in ("target", "spill", "pause")})
    dask_cli = str(Path(sys.executable).with_name("dask"))
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "scheduler.json")
        procs = [subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--no-dashboard", "--scheduler-file", file], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(file) and time.monotonic() < deadline:
                time.sleep(0.2)
            procs.append(subprocess.Popen(
                [dask_cli, "worker", "--scheduler-file", file, "--nworkers", str(args.workers),
                 "--nthreads", "1", "--memory-limit", args.memory_limit, "--no-dashboard",
                 "--host", "127.0.0.1"], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
            import json

            yield json.loads(Path(file).read_text())["address"]
        finally:
            for p in reversed(procs):
                p.terminate()
            for p in reversed(procs):
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()


def _warm() -> None:
    import solver.distributed  # noqa: F401 - the workers' imports, outside the timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--file-rows", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--rank", type=int, default=300)
    parser.add_argument("--max-iter", type=int, default=30)
    parser.add_argument("--held-out", type=int, default=100_000)
    parser.add_argument("--tmp", default=None, help="where the Parquet files are written")
    parser.add_argument("--data", default=None,
                        help="a directory keeping the Parquet files between runs (n<N>/)")
    parser.add_argument("--chunk-rows", type=int, default=None,
                        help="rows of a fit's block (a file's rows split; default a file)")
    parser.add_argument("--keep", choices=["auto", "features", "rows", "nothing"],
                        default="auto", help="what the workers hold between passes (the RBF "
                        "fit's keep=; auto: the memory plan's choice)")
    parser.add_argument("--also-keep", choices=["features", "rows", "nothing"], default=None,
                        help="below the largest size, the RBF fit again with this keep (the "
                        "largest size's like-for-like anchor)")
    parser.add_argument("--dask-memory", choices=["default", "off"], default="default",
                        help="Dask's memory thresholds as configured (default) or off but "
                        "the nanny's terminate")
    parser.add_argument("--copy", action="store_true",
                        help="the magic copy's fit, local equality and calibration")
    parser.add_argument("--copy-rows", type=int, default=200_000)
    parser.add_argument("--copy-files", type=int, default=10)
    parser.add_argument("--copy-rank", type=int, default=200)
    parser.add_argument("--copy-jitter", type=float, default=0.01)
    parser.add_argument("--copy-calibration", nargs="*", default=["sigmoid", "isotonic"],
                        choices=["sigmoid", "isotonic"])
    parser.add_argument("--scheduler", choices=["local", "process"], default="local",
                        help="a LocalCluster (its scheduler in this process) or a scheduler "
                        "and workers in processes of their own")
    parser.add_argument("--kill", action="store_true",
                        help="on the first size, the RBF fit again with a worker SIGKILLed")
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
    memory = {} if args.dask_memory == "default" else {
        f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause")}
    cluster = (separate_processes(args) if args.scheduler == "process" else
               LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                            memory_limit=args.memory_limit, host="127.0.0.1",
                            dashboard_address=":0"))
    with dask.config.set(memory), cluster as local, Client(local) as client:
        client.wait_for_workers(args.workers, timeout=120)
        client.run(_warm)
        if args.copy:
            copy_run(client, args)
        runs = []
        for k, n in enumerate(args.rows):
            runs.append(run_size(client, args, n, k == 0, held))
            if k:
                ratios(args.rows[k - 1], n, runs[-2], runs[-1])
                if "also" in runs[-2]:
                    ratios(args.rows[k - 1], n, runs[-2]["also"], runs[-1])


def ratios(n0: int, n1: int, first: dict, last: dict) -> None:
    print(f"== rbf fit time {n1:,} ({last['keep']}) / {n0:,} rows ({first['keep']}): "
          f"{last['fit'] / first['fit']:.2f}x for "
          f"{n1 / n0:.0f}x rows (at most 12x: {'yes' if last['fit'] <= 12 * first['fit'] else 'NO'}"
          f"); service process peak RSS {last['own'] / 2**20:.0f} / {first['own'] / 2**20:.0f} "
          f"MiB = {last['own'] / first['own']:.2f}x, traced {last['peak'] / 2**20:.1f} / "
          f"{first['peak'] / 2**20:.1f} MiB = {last['peak'] / first['peak']:.2f}x; hold-out "
          f"accuracy rbf - linear at "
          f"{n1:,}: {last['acc'] - last['linear']:+.4f}; load {os.getloadavg()[0]:.1f}",
          flush=True)


if __name__ == "__main__":
    main()
