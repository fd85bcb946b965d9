"""Whether default MSVMAv fits meet their stopping rule, plain against Anderson-accelerated
(issue 49, "convergence that means something"; docs/solver.md, "Convergence").

    .venv/bin/python bench/convergence.py                      # the 10 sets of default_model.py
    .venv/bin/python bench/convergence.py --sets german kc1 --rows 3000

Per set: /train's default hold-out split (stratified 20 %, seed 0), min-max scaled on the
training rows; then ``MSVMAv()`` (linear) and ``MSVMAv(kernel="rbf")`` (gamma "scale",
approximation "auto") with the default rule (stop "objective", tol 1e-4, max_iter 100), once
with ``acceleration="none"`` (the iteration before Anderson acceleration: the same iterates)
and once with the default ``"anderson"``: whether the rule was met (``converged_``), the
iterations (the largest over one-vs-rest tasks), the hold-out accuracy and the seconds. The
RBF fits use at most ``--rows`` training rows (a seeded sample; default 3,000) so that the
bench stays small beside the other sessions' work. Prints the share of fits that met their
rule, before and after, and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from default_model import SETS, TABLE_SETS, load  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import MinMaxScaler  # noqa: E402

from solver import MSVMAv  # noqa: E402


def one(name: str, rows: int) -> list[dict]:
    X, y = load(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    scaler = MinMaxScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), np.clip(scaler.transform(Xte), 0, 1)
    out = []
    for kernel in ("linear", "rbf"):
        Xk, yk = Xtr, ytr
        if kernel == "rbf" and len(ytr) > rows:
            keep = np.sort(np.random.default_rng(0).choice(len(ytr), rows, replace=False))
            Xk, yk = Xtr[keep], ytr[keep]
        for acceleration in ("none", "anderson"):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = MSVMAv(kernel=kernel, acceleration=acceleration).fit(Xk, yk)
            out.append({"set": name, "kernel": kernel, "rows": len(yk),
                        "acceleration": acceleration, "converged": bool(m.converged_),
                        "n_iter": int(m.n_iter_), "acc": float(np.mean(m.predict(Xte) == yte)),
                        "seconds": time.perf_counter() - t,
                        "path": m.kernel_approximation_ or m.linear_solver_})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="*", default=[*TABLE_SETS, "breast_cancer"],
                        choices=list(SETS))
    parser.add_argument("--rows", type=int, default=3000)
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}")
    print(f"{'set':13} {'kernel':6} {'rows':>6} {'path':9} | {'before: met':>11} {'iter':>4} "
          f"{'acc':>6} {'s':>6} | {'after: met':>10} {'iter':>4} {'acc':>6} {'s':>6}")
    results = []
    for name in args.sets:
        rows = one(name, args.rows)
        results.extend(rows)
        for before, after in zip(rows[::2], rows[1::2], strict=True):
            print(f"{name:13} {before['kernel']:6} {before['rows']:6d} {after['path']:9} | "
                  f"{before['converged']!s:>11} {before['n_iter']:4d} {before['acc']:6.4f} "
                  f"{before['seconds']:6.2f} | {after['converged']!s:>10} {after['n_iter']:4d} "
                  f"{after['acc']:6.4f} {after['seconds']:6.2f}", flush=True)
    for acceleration in ("none", "anderson"):
        fits = [r for r in results if r["acceleration"] == acceleration]
        met = sum(r["converged"] for r in fits)
        print(f"acceleration={acceleration}: {met} of {len(fits)} default fits met their rule; "
              f"median iterations {np.median([r['n_iter'] for r in fits]):g}")
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
