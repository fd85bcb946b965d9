"""Benchmark: do the linear step's two shortcuts pay for themselves against the plain path?

    PYTHONPATH=. .venv/bin/python bench/linear_step.py              # both parts
    PYTHONPATH=. .venv/bin/python bench/linear_step.py --part batch --settings 30
    PYTHONPATH=. .venv/bin/python bench/linear_step.py --part bounds --rows 50000

* ``batch``: the lockstep batches of (alpha, beta) settings (``solver._batched_msvmav``, what
  cross-validation of linear MSVMAv uses) against the plain path they replace, one
  ``MSVMAv(alpha, beta).fit`` per setting, on the first of a9a's 5 folds (the shape
  docs/performance.md's model-selection section names), the paper's 11 x 11 grid (or its first
  ``--settings``), both on one BLAS thread in this process, alternating ``--repeat`` times. The
  settings are cut into batches as ``model_selection._plan`` cuts a fold's (at most
  ``LINEAR_BATCH`` a batch, interleaved). Printed: each side's median time, their ratio, and
  the largest difference between the two sides' weights.
* ``bounds``: the "gram" path with its margins from bounds (``solver._margin_bounds``) against
  the same path with a pass over X for the margins each iteration, on bench/wide.py's planted
  100k x 2,000 (50 values a row), alternating ``--repeat`` times. Printed: each side's median
  time, their ratio, and the largest difference between the decisions.

Both sides of a ratio are measured in the same run, alternately, so that the machine's load
(shared with other work) weighs on both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from sklearn.datasets import load_svmlight_file  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402
from wide import planted  # noqa: E402

from solver.internals import msvmav_core as core  # noqa: E402
from solver.internals import setting_chunks as _chunks  # noqa: E402
from solver.model_selection import LINEAR_BATCH  # noqa: E402
from solver.msvmav import MSVMAv  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
GRID = [2.0**k for k in range(-10, 11, 2)]


def first_fold(cv: int = 5):
    X, y = load_svmlight_file(str(DATA / "a9a"), n_features=123)
    X = X.tocsr()
    order = np.random.default_rng(0).permutation(X.shape[0])
    train = np.sort(order[X.shape[0] // cv:])
    return X[train], np.where(y[train] > 0, 1.0, -1.0)


def _batched(X, y, settings: list[tuple[float, float]]) -> tuple[float, np.ndarray]:
    """Seconds and weights (one row a setting) of the lockstep batches, cut as
    cross-validation cuts a fold's settings (``model_selection._plan``)."""
    from solver.internals import batched_msvmav

    fit_linear_batch = batched_msvmav.fit_linear_batch

    t = time.perf_counter()
    W = np.zeros((len(settings), X.shape[1] + 1))
    for idx in _chunks(list(range(len(settings))), -(-len(settings) // LINEAR_BATCH)):
        W[idx] = fit_linear_batch(X, y, [settings[i][0] for i in idx],
                                  [settings[i][1] for i in idx])[0]
    return time.perf_counter() - t, W


def _plain(X, y, settings: list[tuple[float, float]]) -> tuple[float, np.ndarray]:
    """Seconds and weights of one ``MSVMAv(alpha, beta).fit`` per setting."""
    t = time.perf_counter()
    W = [np.r_[m.coef_[0], m.intercept_]
         for m in (MSVMAv(alpha=a, beta=b).fit(X, y) for a, b in settings)]
    return time.perf_counter() - t, np.vstack(W)


def bench_batch(n_settings: int, repeat: int) -> None:
    X, y = first_fold()
    settings = [(a, b) for a in GRID for b in GRID][:n_settings]
    print(f"batch: a9a fold 1 of 5, {X.shape[0]} x {X.shape[1]}, {len(settings)} settings, "
          f"batches of at most {LINEAR_BATCH} as cross-validation cuts them")
    times: dict[str, list[float]] = {"plain": [], "batch": []}
    weights: dict[str, np.ndarray] = {}
    with threadpool_limits(1):
        for _ in range(repeat):
            for side, run in (("plain", _plain), ("batch", _batched)):
                seconds, W = run(X, y, settings)
                times[side].append(seconds)
                weights[side] = W
                print(f"  {side} {seconds:.2f} s", flush=True)
    single, batched = statistics.median(times["plain"]), statistics.median(times["batch"])
    gap = float(np.max(np.abs(weights["batch"] - weights["plain"])))
    print(f"  plain fits {single:.2f} s, lockstep batches {batched:.2f} s (medians of {repeat}): "
          f"speed-up x{single / batched:.2f}; max |w_batch - w_plain| = {gap:.1e}")


def _gram_fit(X, y, bounds: bool) -> tuple[float, np.ndarray]:
    kept = core.MarginBounds
    if not bounds:
        core.MarginBounds = lambda *args: None  # the margins by a pass over X instead
    try:
        t = time.perf_counter()
        m = MSVMAv(linear_solver="gram").fit(X, y)
        return time.perf_counter() - t, m.decision_function(X)
    finally:
        core.MarginBounds = kept


def bench_bounds(n: int, d: int, repeat: int) -> None:
    if not hasattr(core, "MarginBounds"):
        print("bounds: solver._margin_bounds is gone (it did not pay: see docs/solver.md)")
        return
    X, y = planted(n, d)
    print(f"bounds: planted {n} x {d}, {X.nnz} stored values, linear_solver='gram'")
    times: dict[bool, list[float]] = {True: [], False: []}
    decisions: dict[bool, np.ndarray] = {}
    for _ in range(repeat):
        for bounds in (False, True):
            seconds, decisions[bounds] = _gram_fit(X, y, bounds)
            times[bounds].append(seconds)
            print(f"  {'bounds' if bounds else 'passes'} {seconds:.2f} s", flush=True)
    plain, bounded = statistics.median(times[False]), statistics.median(times[True])
    gap = float(np.max(np.abs(decisions[True] - decisions[False])))
    print(f"  passes {plain:.2f} s, bounds {bounded:.2f} s (medians of {repeat}): "
          f"bounds take x{bounded / plain:.2f} the time; max |decision difference| = {gap:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("batch", "bounds", "both"), default="both")
    ap.add_argument("--settings", type=int, default=121)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--width", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.part in ("batch", "both"):
        bench_batch(args.settings, args.repeat)
    if args.part in ("bounds", "both"):
        bench_bounds(args.rows, args.width, args.repeat)


if __name__ == "__main__":
    main()
