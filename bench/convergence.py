"""Whether default MSVMAv fits meet their stopping rule, and at what hold-out accuracy (issue 49,
"convergence that means something"; docs/solver.md, "Convergence"; docs/performance.md, "The
default stopping rule").

    .venv/bin/python bench/convergence.py                      # the 10 sets of default_model.py
    .venv/bin/python bench/convergence.py --sets german kc1 --rows 3000
    .venv/bin/python bench/convergence.py --before tol=1e-4 --after acceleration=anderson

Per set: /train's default hold-out split (stratified 20 %, seed 0), min-max scaled on the
training rows; then ``MSVMAv()`` (linear) and ``MSVMAv(kernel="rbf")`` (gamma "scale",
approximation "auto"), once with the ``--before`` parameters (default ``tol=1e-4``: the default
stopping rule before issue 49's second change) and once with ``--after`` (default: none, the
library's defaults as they are): whether the rule was met (``converged_``), the iterations (the
largest over one-vs-rest tasks), the hold-out accuracy and the seconds, both in the same run.
The RBF fits use at most ``--rows`` training rows (a seeded sample; default 3,000) so that the
bench stays small beside the other sessions' work. Prints the share of fits that met their
rule, the accuracy change after - before (mean and worst over the fits), and the load average.
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


def parameters(pairs: list[str]) -> dict:
    """``name=value`` pairs as estimator parameters (numbers where they parse as numbers)."""
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            out[name] = int(value) if value.isdigit() else float(value)
        except ValueError:
            out[name] = value
    return out


def one(name: str, rows: int, variants: tuple[dict, dict]) -> list[dict]:
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
        for variant in variants:
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = MSVMAv(kernel=kernel, **variant).fit(Xk, yk)
            out.append({"set": name, "kernel": kernel, "rows": len(yk),
                        "converged": bool(m.converged_), "n_iter": int(m.n_iter_),
                        "warned": bool(m.fit_report().warning),
                        "acc": float(np.mean(m.predict(Xte) == yte)),
                        "seconds": time.perf_counter() - t,
                        "path": m.kernel_approximation_ or m.linear_solver_})
    return out


def summary(results: list[dict]) -> None:
    for label, fits in (("before", results[::2]), ("after", results[1::2])):
        met = sum(r["converged"] for r in fits)
        silent = sum(not r["converged"] and not r["warned"] for r in fits)
        print(f"{label}: {met} of {len(fits)} fits met their rule; median iterations "
              f"{np.median([r['n_iter'] for r in fits]):g}; fits at the cap without a "
              f"warning: {silent}")
    change = [a["acc"] - b["acc"] for b, a in zip(results[::2], results[1::2], strict=True)]
    worst = int(np.argmin(change))
    print(f"hold-out accuracy after - before: mean {np.mean(change):+.4f}, worst "
          f"{change[worst]:+.4f} ({results[2 * worst]['set']} {results[2 * worst]['kernel']})")
    for kernel in ("linear", "rbf"):
        part = [c for c, r in zip(change, results[::2], strict=True) if r["kernel"] == kernel]
        print(f"  {kernel}: mean {np.mean(part):+.4f}, worst {min(part):+.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="*", default=[*TABLE_SETS, "breast_cancer"],
                        choices=list(SETS))
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--before", nargs="*", default=["tol=1e-4"], metavar="NAME=VALUE")
    parser.add_argument("--after", nargs="*", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    variants = (parameters(args.before), parameters(args.after))
    print(f"before: {variants[0] or 'defaults'}; after: {variants[1] or 'defaults'}")
    print(f"load average at start: {os.getloadavg()}")
    print(f"{'set':13} {'kernel':6} {'rows':>6} {'path':9} | {'before: met':>11} {'iter':>4} "
          f"{'acc':>6} {'s':>6} | {'after: met':>10} {'iter':>4} {'acc':>6} {'s':>6}")
    results = []
    for name in args.sets:
        rows = one(name, args.rows, variants)
        results.extend(rows)
        for before, after in zip(rows[::2], rows[1::2], strict=True):
            print(f"{name:13} {before['kernel']:6} {before['rows']:6d} {after['path']:9} | "
                  f"{before['converged']!s:>11} {before['n_iter']:4d} {before['acc']:6.4f} "
                  f"{before['seconds']:6.2f} | {after['converged']!s:>10} {after['n_iter']:4d} "
                  f"{after['acc']:6.4f} {after['seconds']:6.2f}", flush=True)
    summary(results)
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
