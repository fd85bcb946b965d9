"""Benchmark: the paper's full linear MSVMAv grid on a9a by 5-fold cross-validation.

    .venv/bin/python bench/model_selection.py               # 121 settings x 5 folds, n_jobs=2
    .venv/bin/python bench/model_selection.py --n-jobs 1 --verify 3

Grid: alpha, beta in {2^-10, 2^-8, ..., 2^10}, max_iter=100, tol=1e-8, on the a9a training file
(32 561 rows, 123 binary features, already in [0, 1]). Prints the measured wall time beside the
naive estimate (settings x folds x one timed single fit on a fold, alpha=16, beta=0.25) and the
speed-up. ``--verify K`` refits K settings of the first fold with MSVMAv one by one and checks that
their fold accuracies equal the table's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# This file is named like a module of the package it measures: keep its folder off the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from app.ingest import parse_dataset  # noqa: E402
from solver.model_selection import cross_validate_grid, kfold_indices  # noqa: E402
from solver.msvmav import MSVMAv  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("--verify", type=int, default=3, help="settings to refit one by one")
    args = ap.parse_args(argv)
    path = DATA / "a9a"
    parsed = parse_dataset(path.read_bytes(), path.name, n_features=123)
    X, y = parsed.X, np.asarray(parsed.y)
    print(f"a9a: {X.shape[0]} x {X.shape[1]}, paper grid 11 x 11, {args.cv} folds, "
          f"n_jobs={args.n_jobs}")
    fixed = {"max_iter": 100, "tol": 1e-8}

    folds = kfold_indices(X.shape[0], args.cv, 0)
    tr, te = folds[0]
    t = time.perf_counter()
    single = MSVMAv(alpha=16, beta=0.25, **fixed).fit(X[tr], y[tr])
    one_fit = time.perf_counter() - t
    naive = 121 * args.cv * one_fit
    print(f"one single fit on a fold (alpha=16, beta=0.25): {one_fit:.3f} s, "
          f"{single.n_iter_} iterations")

    progress = []
    t = time.perf_counter()
    res = cross_validate_grid("msvmav", X, y, kernel="linear", grid="paper", cv=args.cv,
                              random_state=0, n_jobs=args.n_jobs, params=fixed,
                              callback=lambda d, n: progress.append(d))
    wall = time.perf_counter() - t
    print(f"cross_validate_grid: {wall:.1f} s for {len(res.table)} settings x {args.cv} folds "
          f"({len(progress)} progress reports)")
    print(f"naive estimate: {naive:.1f} s (121 x {args.cv} x {one_fit:.3f} s); "
          f"speed-up x{naive / wall:.1f}")
    print(f"best: {res.best_params} mean accuracy {res.best_score:.4f}")

    if args.verify:
        rng = np.random.default_rng(0)
        picks = sorted({res.best_index, *rng.choice(len(res.table), args.verify - 1,
                                                     replace=False).tolist()})
        ok = True
        for i in picks:
            p = res.table[i]["params"]
            acc = MSVMAv(**p, **fixed).fit(X[tr], y[tr]).score(X[te], y[te])
            same = acc == res.table[i]["scores"][0]
            ok &= same
            print(f"  verify {p}: single fit {acc:.6f}, table {res.table[i]['scores'][0]:.6f}"
                  f" {'same' if same else 'DIFFERENT'}")
        print("verification:", "identical" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
