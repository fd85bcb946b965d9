"""Benchmark: do the linear step's two shortcuts pay for themselves against the plain path?

    PYTHONPATH=. .venv/bin/python bench/linear_step.py              # both parts
    PYTHONPATH=. .venv/bin/python bench/linear_step.py --part batch --settings 30
    PYTHONPATH=. .venv/bin/python bench/linear_step.py --part bounds --rows 50000

* ``batch``: the lockstep batch of (alpha, beta) settings (``solver._batched_msvmav``, what
  cross-validation of linear MSVMAv used) against the plain path it replaces, one
  ``MSVMAv(alpha, beta).fit`` per setting, on the first of a9a's 5 folds (the shape
  docs/performance.md's model-selection section names), the paper's 11 x 11 grid (or its first
  ``--settings``), both on one BLAS thread in this process. Printed: each side's time, their
  ratio, and the largest difference between the two sides' weights.
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

import solver._msvmav_core as core  # noqa: E402
from solver.msvmav import MSVMAv  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
GRID = [2.0**k for k in range(-10, 11, 2)]


def first_fold(cv: int = 5):
    X, y = load_svmlight_file(str(DATA / "a9a"), n_features=123)
    X = X.tocsr()
    order = np.random.default_rng(0).permutation(X.shape[0])
    train = np.sort(order[X.shape[0] // cv:])
    return X[train], np.where(y[train] > 0, 1.0, -1.0)


def bench_batch(n_settings: int) -> None:
    try:
        from solver._batched_msvmav import fit_linear_batch
    except ImportError:
        print("batch: solver._batched_msvmav is gone (it did not pay: see docs/solver.md)")
        return
    X, y = first_fold()
    settings = [(a, b) for a in GRID for b in GRID][:n_settings]
    print(f"batch: a9a fold 1 of 5, {X.shape[0]} x {X.shape[1]}, {len(settings)} settings")
    with threadpool_limits(1):
        t = time.perf_counter()
        W = np.vstack([fit_linear_batch(X, y, [a for a, _ in settings[i:i + 32]],
                                        [b for _, b in settings[i:i + 32]])[0]
                       for i in range(0, len(settings), 32)])
        batched = time.perf_counter() - t
        t = time.perf_counter()
        plain = []
        for a, b in settings:
            m = MSVMAv(alpha=a, beta=b).fit(X, y)
            plain.append(np.r_[m.coef_[0], m.intercept_])
        single = time.perf_counter() - t
    gap = float(np.max(np.abs(W - np.vstack(plain))))
    print(f"  plain fits {single:.2f} s, lockstep batch {batched:.2f} s: "
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
        bench_batch(args.settings)
    if args.part in ("bounds", "both"):
        bench_bounds(args.rows, args.width, args.repeat)


if __name__ == "__main__":
    main()
