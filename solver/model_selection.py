"""k-fold cross-validation over a hyper-parameter grid for MSVMAv and every comparator.

``cross_validate_grid`` scores each configuration of a grid on the same seeded, shuffled,
unstratified k folds (scikit-learn's ``KFold(cv, shuffle=True, random_state=...)``) and returns
the table of mean accuracies. The results are those of a plain loop

    for params in configs:
        for train, test in folds:
            score = make_estimator(algorithm, params, kernel).fit(X[train], y[train])
                        .score(X[test], y[test])

but the work that does not depend on a hyper-parameter is shared:

* **kernels** ("rbf", "poly"): one Gram matrix per (fold, gamma), reused by every other
  hyper-parameter (the estimators are fitted with ``kernel="precomputed"``). For MSVMAv also
  [K | (I + K)^-1] is computed once per (fold, gamma) and shared by all (alpha, beta);
* **linear MSVMAv** (two classes): the (alpha, beta) settings of a fold run in lockstep
  (``solver._batched_msvmav``) in batches of at most ``LINEAR_BATCH``: one pass over the data
  per iteration for all settings of a batch, the (alpha, beta)-free start and active-set sums
  computed once;
* the (fold, gamma) or (fold, chunk of settings) tasks run in ``n_jobs`` joblib worker
  processes (one BLAS thread each) or, inside ``solver.parallel.dask_cluster``, on a Dask
  cluster (``solver.parallel.run_tasks``); the data go to each worker once. The table is the
  same wherever the tasks run and however many workers there are.

Scaling: this function does **not** re-scale per fold. The caller min-max scales the training
part once, before cross-validation (what the paper's protocol appears to do; see
``solver.experiments``), and the folds are cut from the scaled data.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from ._active_set import DualSystem
from ._base import to_dense_rows
from ._batched_msvmav import fit_linear_batch
from ._msvmav_core import DualSpace, iterate
from .algorithms import estimator_class
from .comparators import iter_configs, param_grid
from .kernels import kernel_type, make_kernel, resolve_gamma
from .msvmav import MSVMAv, kernel_threads
from .parallel import dask_client, effective_jobs, run_tasks

KERNEL_CHOICES = ("linear", "rbf", "poly")

ProgressCallback = Callable[[int, int], Any]


def make_estimator(algorithm: str, params: dict | None = None, *, kernel: str = "linear",
                   fixed: dict | None = None):
    """A fresh estimator: ``estimator_class(algorithm)(kernel=kernel, **fixed, **params)``."""
    return estimator_class(algorithm)(kernel=kernel, **(fixed or {}), **(params or {}))


def resolve_grid(algorithm: str, grid: str | dict, *, kernel: str = "linear",
                 n_features: int) -> dict[str, list]:
    """The grid as a dict of lists: "paper" / "quick" (``comparators.param_grid``, with the gamma
    grid {2^j / d} for kernels) or an explicit dict (used as given)."""
    estimator_class(algorithm)
    if kernel not in KERNEL_CHOICES:
        raise ValueError(f"kernel: use one of {list(KERNEL_CHOICES)}, got {kernel!r}")
    if isinstance(grid, str):
        if grid not in ("paper", "quick"):
            raise ValueError(f"grid: use 'paper', 'quick' or a dict, got {grid!r}")
        return param_grid(algorithm, kernel=kernel, n_features=n_features,
                          quick=grid == "quick")
    if not isinstance(grid, dict):
        raise ValueError(f"grid: use 'paper', 'quick' or a dict, got {type(grid).__name__}")
    return {str(k): list(v) for k, v in grid.items()}


@dataclass
class SearchResult:
    """The outcome of ``cross_validate_grid``.

    ``table`` has one row per configuration, in grid order: ``params`` (dict),
    ``mean_accuracy`` (mean over folds), ``std`` (across folds, ddof=1; 0 for one fold),
    ``scores`` (per-fold accuracies, fold order) and ``fit_seconds`` (fitting and scoring time
    summed over folds; for work shared by several configurations, its share). ``best_params`` is
    the first configuration with the highest mean accuracy.
    """

    algorithm: str
    kernel: str
    cv: int
    random_state: int | None
    table: list[dict]
    best_index: int
    seconds: float
    fixed_params: dict = field(default_factory=dict)

    @property
    def best_params(self) -> dict:
        return dict(self.table[self.best_index]["params"])

    @property
    def best_score(self) -> float:
        return float(self.table[self.best_index]["mean_accuracy"])

    def to_dict(self) -> dict:
        return {"algorithm": self.algorithm, "kernel": self.kernel, "cv": self.cv,
                "random_state": self.random_state, "fixed_params": dict(self.fixed_params),
                "best_params": self.best_params, "best_score": self.best_score,
                "best_index": self.best_index, "seconds": self.seconds,
                "table": [dict(row, params=dict(row["params"])) for row in self.table]}


def kfold_indices(n: int, cv: int = 5, random_state: int | None = 0) -> list[tuple]:
    """The folds used by ``cross_validate_grid``: seeded, shuffled, unstratified KFold."""
    if cv < 2:
        raise ValueError(f"cv: needs at least 2 folds, got {cv}")
    if n < cv:
        raise ValueError(f"cv: {cv} folds need at least {cv} rows, got {n}")
    return list(KFold(n_splits=cv, shuffle=True, random_state=random_state).split(np.zeros(n)))


#: most (alpha, beta) settings in one lockstep batch of linear MSVMAv (the paper grid's 121 make
#: 4 batches per fold: about 25 % more work than one batch, 4x the tasks to spread)
LINEAR_BATCH = 32


# -- the work units ------------------------------------------------------------------------------
# A task is ("linear_msvmav" | "kernel" | "plain", fold, config indices, gamma); ``shared`` holds
# the data, the folds and the grid (sent to each worker once, see solver.parallel).


def _accuracy(classes: np.ndarray, decision: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Accuracy of each column of binary decision values (> 0 predicts classes[1])."""
    pred = classes[(decision > 0).astype(np.intp)]
    return np.mean(pred == y[:, None], axis=0)


def _run_task(shared: dict, task: tuple, tick: Callable[[], Any]) -> Cells:
    """One task: [(config index, fold, accuracy, seconds)]. ``tick`` is called within it (the
    search's callback in this process; a stop check in a worker process)."""
    # an iteration cap reached during a grid search is part of the protocol, not news
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _run_task_quiet(shared, task, tick)


Cells = list[tuple[int, int, float, float]]  # (config index, fold, accuracy, seconds)


def _run_task_quiet(shared: dict, task: tuple, tick: Callable[[], Any]) -> Cells:
    kind, fold, idx, gamma = task
    train, test = shared["folds"][fold]
    X, y = shared["X"], shared["y"]
    part = (X[train], y[train], X[test], y[test])
    if kind == "linear_msvmav":
        return _linear_msvmav_cells(shared, part, fold, idx, tick)
    if kind == "kernel":
        return _kernel_cells(shared, part, fold, idx, gamma, tick)
    out: Cells = []
    Xtr, ytr, Xte, yte = part
    for i in idx:
        tick()
        t = time.perf_counter()
        est = make_estimator(shared["algorithm"], shared["configs"][i], kernel=shared["kernel"],
                             fixed=shared["fixed"])
        acc = float(np.mean(est.fit(Xtr, ytr).predict(Xte) == yte))
        out.append((i, fold, acc, time.perf_counter() - t))
    return out


def _linear_msvmav_cells(shared: dict, part: tuple, fold: int, idx: list[int],
                         tick: Callable[[], Any]) -> Cells:
    """Linear MSVMAv, two classes: the fold's (alpha, beta) settings in one lockstep batch."""
    Xtr, ytr, Xte, yte = part
    configs = shared["configs"]
    t0 = time.perf_counter()
    classes, yi = np.unique(ytr, return_inverse=True)
    est = MSVMAv(**shared["fixed"])
    W, n_iter = fit_linear_batch(
        # a grid may leave alpha or beta out: the fixed value (or MSVMAv's default) then
        Xtr, 2.0 * yi - 1.0, [configs[i].get("alpha", est.alpha) for i in idx],
        [configs[i].get("beta", est.beta) for i in idx], max_iter=est.max_iter, tol=est.tol,
        stop=est.stop,
        fit_intercept=est.fit_intercept, callback=lambda _k: tick())
    d = shared["X"].shape[1]
    coef, bias = (W[:, :d], W[:, d]) if est.fit_intercept else (W, 0.0)
    acc = _accuracy(classes, np.asarray(Xte @ coef.T) + bias, yte)
    total = time.perf_counter() - t0
    share = (n_iter + 1) / float(np.sum(n_iter + 1))
    return [(i, fold, float(a), float(total * s)) for i, a, s in zip(idx, acc, share,
                                                                     strict=True)]


def _kernel_cells(shared: dict, part: tuple, fold: int, idx: list[int], gamma: float,
                  tick: Callable[[], Any]) -> Cells:
    """Kernel models: one Gram matrix for the fold and gamma, shared by the settings."""
    Xtr, ytr, Xte, yte = part
    fixed, algorithm, configs = shared["fixed"], shared["algorithm"], shared["configs"]
    t0 = time.perf_counter()
    kernel = make_kernel(shared["kernel"], gamma=gamma,
                         **{k: fixed[k] for k in ("degree", "coef0") if k in fixed})
    with kernel_threads(len(ytr)):  # the thread policy of MSVMAv's exact kernel
        K = kernel.gram(Xtr)
        Kte = kernel.matrix(Xte, to_dense_rows(Xtr))
    prep = (time.perf_counter() - t0) / len(idx)
    fixed_k = {k: v for k, v in fixed.items() if k not in ("degree", "coef0")}
    if algorithm == "msvmav":
        return _msvmav_kernel_cells(K, Kte, ytr, yte, configs, fixed_k, fold, idx, prep, tick)
    out: Cells = []
    for i in idx:
        tick()
        t = time.perf_counter()
        params = {k: v for k, v in configs[i].items() if k != "gamma"}
        est = make_estimator(algorithm, params, kernel="precomputed", fixed=fixed_k)
        acc = float(np.mean(est.fit(K, ytr).predict(Kte) == yte))
        out.append((i, fold, acc, time.perf_counter() - t + prep))
    return out


def _msvmav_kernel_cells(K: np.ndarray, Kte: np.ndarray, ytr: np.ndarray, yte: np.ndarray,
                         configs: list[dict], fixed: dict, fold: int, idx: list[int],
                         prep: float, tick: Callable[[], Any]) -> Cells:
    """Exact-kernel MSVMAv: [K | (I + K)^-1] once, shared by every (alpha, beta)."""
    classes, yi = np.unique(ytr, return_inverse=True)
    ypm = 2.0 * yi - 1.0
    pair = DualSystem.pair(K)
    base = MSVMAv(**fixed)
    out: Cells = []
    with kernel_threads(len(ytr)):
        for i in idx:
            t = time.perf_counter()
            p = configs[i]
            space = DualSpace(pair, ypm, p.get("beta", base.beta))
            a, _, _, _ = iterate(space, ypm, alpha=p.get("alpha", base.alpha),
                                 max_iter=p.get("max_iter", base.max_iter),
                                 tol=p.get("tol", base.tol), callback=lambda _i: tick(),
                                 stop=p.get("stop", base.stop))
            acc = _accuracy(classes, (Kte @ a)[:, None], yte)[0]
            out.append((i, fold, float(acc), time.perf_counter() - t + prep))
    return out


def _chunks(items: list[int], k: int) -> list[list[int]]:
    """k interleaved chunks (settings of similar cost spread over the chunks)."""
    k = max(1, min(k, len(items)))
    return [items[j::k] for j in range(k)]


def _plan(algorithm: str, kernel: str, configs: list[dict], fixed: dict, n_folds: int,
          n_train: int, binary: bool, n_jobs: int, n_features: int = 0) -> list[tuple]:
    all_idx = list(range(len(configs)))
    if kernel_type(kernel).primal:
        # the lockstep batch keeps D x D systems: only where fit() itself would (dense path)
        # (class weights: every cell is a weighted fit, MSVMAv.fit's own)
        fast = (algorithm == "msvmav" and binary and fixed.get("class_weight") is None
                and all(set(c) <= {"alpha", "beta"} for c in configs)
                and make_estimator(algorithm, {}, kernel=kernel, fixed=fixed)
                .linear_path(n_train, n_features) == "dense")
        kind = "linear_msvmav" if fast else "plain"
        # a lockstep batch's rounding depends on its make-up: fixed batches (never sized by
        # n_jobs) keep the table the same for every worker count and backend
        per_fold = (-(-len(configs) // LINEAR_BATCH) if fast
                    else max(n_jobs, min(len(configs), 4)))
        return [(kind, f, chunk, None) for f in range(n_folds)
                for chunk in _chunks(all_idx, per_fold)]
    # kernels: one task per (fold, gamma); MSVMAv only when its exact path would be used
    est = make_estimator(algorithm, {}, kernel=kernel, fixed=fixed)
    # share Gram matrices only where MSVMAv.fit itself would take the exact path
    if algorithm == "msvmav" and (not binary or est.kernel_path(n_train) != "exact"
                                  or fixed.get("class_weight") is not None):
        return [("plain", f, chunk, None) for f in range(n_folds)
                for chunk in _chunks(all_idx, max(n_jobs, 4))]
    groups: dict[float, list[int]] = {}
    for i, c in enumerate(configs):
        groups.setdefault(c.get("gamma", fixed.get("gamma")), []).append(i)
    return [("kernel", f, idx, g) for f in range(n_folds) for g, idx in groups.items()]


def cross_validate_grid(algorithm: str, X, y, *, kernel: str = "linear",
                        grid: str | dict = "quick", cv: int = 5, random_state: int | None = 0,
                        n_jobs: int | None = 2, callback: ProgressCallback | None = None,
                        params: dict | None = None) -> SearchResult:
    """Cross-validated accuracy of every configuration of a grid.

    Parameters
    ----------
    algorithm : a name of ``solver.algorithms.TABLE``
    X : (n, d) array or CSR matrix, already scaled (no per-fold re-scaling is done here)
    y : (n,) labels
    kernel : "linear", "rbf" or "poly"; kernels add the gamma grid {2^j / d}
    grid : "paper", "quick" or a dict {parameter: list of values}
    cv : number of folds (KFold with shuffle, unstratified, seeded by ``random_state``)
    n_jobs : joblib worker processes (None or -1 = all cores; 1 = in this process); inside
        ``solver.parallel.dask_cluster`` the tasks run on the Dask cluster instead
    callback : ``callback(done_cells, total_cells)`` after each finished task, where a cell is
        one (configuration, fold) pair, and in between with the same count: within the
        configurations and iterations of a task when n_jobs is 1, at least every half second
        while waiting for worker processes otherwise. An exception raised by the callback
        aborts the search and propagates: no further task starts, joblib worker processes
        stop their running tasks at their next tick, and on a Dask cluster the queued tasks
        are cancelled but those already running on a worker run to their end (their results
        are discarded).
    params : fixed estimator parameters for every fit (e.g. {"max_iter": 100, "tol": 1e-8})

    Returns
    -------
    SearchResult with ``table``, ``best_params``, ``best_score``.
    """
    X, y, fixed, configs = _prepare(algorithm, X, y, kernel, grid, params)
    folds = kfold_indices(X.shape[0], cv, random_state)
    n_jobs = effective_jobs(n_jobs)
    tasks = _plan(algorithm, kernel, configs, fixed, len(folds),
                  max(len(tr) for tr, _ in folds), np.unique(y).size == 2, n_jobs,
                  X.shape[1])
    shared = {"X": X, "y": y, "configs": configs, "fixed": fixed, "algorithm": algorithm,
              "kernel": kernel, "folds": folds}
    t0 = time.perf_counter()
    scores, seconds = _run(shared, tasks, n_jobs, callback)
    means = scores.mean(axis=1)
    stds = scores.std(axis=1, ddof=1) if len(folds) > 1 else np.zeros(len(configs))
    table = [{"params": dict(configs[i]), "mean_accuracy": float(means[i]),
              "std": float(stds[i]), "scores": [float(s) for s in scores[i]],
              "fit_seconds": float(seconds[i])} for i in range(len(configs))]
    best = int(np.argmax(means))
    return SearchResult(algorithm=algorithm, kernel=kernel, cv=cv, random_state=random_state,
                        table=table, best_index=best, seconds=time.perf_counter() - t0,
                        fixed_params=fixed)


def _prepare(algorithm: str, X, y, kernel: str, grid: str | dict, params: dict | None
             ) -> tuple[Any, np.ndarray, dict, list[dict]]:
    """(X as float64 CSR or C-contiguous array, y, fixed parameters, configurations); for
    kernels every configuration carries its gamma (resolved for X's width)."""
    n, d = X.shape
    y = np.asarray(y)
    if y.shape[0] != n:
        raise ValueError(f"y: has {y.shape[0]} labels for {n} rows")
    if sparse.issparse(X):
        X = sparse.csr_matrix(X, dtype=np.float64)
    else:
        X = np.ascontiguousarray(X, dtype=np.float64)
    fixed = dict(params or {})
    # the cells score accuracy from decision values: a calibration would only cost five
    # more fits per cell (the refit on the best configuration calibrates)
    fixed.pop("calibration", None)
    # a named width ("scale", "auto") is resolved once, on the rows searched
    width = not kernel_type(kernel).primal
    if width and "gamma" in fixed:
        fixed["gamma"] = resolve_gamma(fixed["gamma"], X)
    configs = iter_configs(resolve_grid(algorithm, grid, kernel=kernel, n_features=d))
    if width:
        for c in configs:
            if "gamma" not in c:
                c["gamma"] = resolve_gamma(fixed.get("gamma", "scale"), X)
            elif isinstance(c["gamma"], str):
                c["gamma"] = resolve_gamma(c["gamma"], X)
        fixed.pop("gamma", None)
    return X, y, fixed, configs


def _run(shared: dict, tasks: list[tuple], n_jobs: int, callback: ProgressCallback | None
         ) -> tuple[np.ndarray, np.ndarray]:
    """Run the tasks; (scores (configs, folds), seconds per configuration)."""
    n_configs, n_folds = len(shared["configs"]), len(shared["folds"])
    total = n_configs * n_folds
    scores = np.full((n_configs, n_folds), np.nan)
    seconds = np.zeros(n_configs)
    done = 0

    def tick() -> None:
        if callback is not None:
            callback(done, total)

    # the longest tasks first: fewer idle workers at the end
    tasks = sorted(tasks, key=lambda t: -len(t[2]))
    in_process = dask_client() is None and (n_jobs == 1 or len(tasks) == 1)
    linear = any(t[0] == "linear_msvmav" for t in tasks)
    with (threadpool_limits(1) if linear and in_process else nullcontext(),
          closing(run_tasks(_run_task, shared, tasks, n_jobs, tick)) as results):
        for res in results:
            for i, f, acc, sec in res or ():  # None: no task finished in the last POLL s
                scores[i, f] = acc
                seconds[i] += sec
            done += len(res or ())
            tick()
    return scores, seconds


def n_cells(algorithm: str, n_features: int, *, kernel: str = "linear",
            grid: str | dict = "quick", cv: int = 5) -> int:
    """Number of (configuration, fold) cells a search will fit (for progress and budgeting)."""
    return cv * len(iter_configs(resolve_grid(algorithm, grid, kernel=kernel,
                                              n_features=n_features)))


__all__ = ["SearchResult", "cross_validate_grid", "estimator_class",
           "kfold_indices", "make_estimator", "n_cells", "resolve_grid"]

