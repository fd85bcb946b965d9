"""Benchmark: linear MSVMAv on wide sparse data against LIBLINEAR (sklearn LinearSVC).

    .venv/bin/python bench/wide.py              # 100k rows x {100k, 2k} features + d-sweep
    .venv/bin/python bench/wide.py --quick      # 20k rows, sweep up to 100k features
    .venv/bin/python bench/wide.py --rows 50000 --no-sweep --no-direct
    .venv/bin/python bench/wide.py --widths 2000 --repeat 3 --with-cg --no-sweep
    .venv/bin/python bench/wide.py --widths 2000 --repeat 3 --no-sweep --no-direct --no-floor

Data: synthetic CSR, 50 stored values per row (uniform in [0, 1), random columns), labels from
a planted linear rule y = sign(x . w* - median) with 5% of the labels flipped. Each fit runs in a
child process (bench/_fitrun.py): wall time of fit(), and its peak memory measured as peak RSS
(VmHWM, reset before the fit) minus the RSS before it, i.e. beyond the loaded data.

Printed per shape: LinearSVC (the anchor) and MSVMAv (linear_solver="auto") time and peak
memory, run alternately --repeat times (and linear_solver="cg" too with --with-cg), the ratio
of their median times (goal <= 2x LinearSVC) and of each pair, MSVMAv's peak against
3 x the data + 300 MB (the goal), and where the direct dense D x D path fits in memory (its
estimate below 4 GiB), the largest difference between the decisions of the automatic path
and of the dense path (goal <= 1e-8). Where "auto" takes the "gram" path, the time of
what that path cannot avoid (the bias column, X_A^T X_A once, one product with it per
iteration; no solve) is printed against LinearSVC too: a lower bound of that path's time.
Then a d-sweep at fixed rows and stored values: memory should stay flat in d (it is linear in
nnz + n + d, and nnz is fixed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parent))

import _fitrun  # noqa: E402
import numpy as np  # noqa: E402
from scipy import sparse  # noqa: E402

from solver.memory import estimate_fit  # noqa: E402

PER_ROW = 50
DIRECT_LIMIT = 4 * 2**30
MB = 2**20


def planted(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.integers(0, d, size=(n, PER_ROW)), axis=1)
    X = sparse.csr_matrix((rng.random(n * PER_ROW), cols.ravel(),
                           np.arange(0, n * PER_ROW + 1, PER_ROW)), shape=(n, d))
    X.sum_duplicates()
    score = X @ rng.normal(size=d)
    y = np.where(score > np.median(score), 1, -1)
    flip = rng.random(n) < 0.05
    y[flip] = -y[flip]
    return X, y


def fmt(result: dict) -> str:
    if "error" in result:
        return f"FAILED ({result['error']})"
    info = result.get("fit_info") or {}
    threads = (f"  ({info['threaded_products']} products on two threads)"
               if "threaded_products" in info else "")
    return f"{result['seconds']:8.2f} s {result['peak_bytes'] / MB:8.0f} MB{threads}"


def _median(results: list[dict]) -> dict:
    """The median time (the mean of the middle two for an even count) and the largest peak."""
    ok = [r for r in results if "error" not in r]
    if not ok:
        return results[0]
    return {"seconds": statistics.median(r["seconds"] for r in ok),
            "peak_bytes": max(r["peak_bytes"] for r in ok)}


def compare(n: int, d: int, tmp: Path, direct: bool, repeat: int, with_cg: bool,
            floor: bool = True) -> None:
    X, y = planted(n, d)
    path = tmp / f"wide-{n}-{d}.npz"
    _fitrun.save(path, X, y)
    size = _fitrun.data_bytes(X)
    print(f"\n{n} x {d}, {X.nnz} stored values, data {size / MB:.0f} MB")
    fits = [("LinearSVC", "linearsvc", {}), ("MSVMAv auto", "msvmav", {})]
    if with_cg and estimate_fit("msvmav", n, d, X.nnz, {}).path != "cg":
        fits.append(("MSVMAv cg", "msvmav", {"linear_solver": "cg"}))
    results: dict[str, list[dict]] = {label: [] for label, _, _ in fits}
    for k in range(repeat):  # the anchor and the subjects alternate under the same load
        for label, algorithm, params in fits:
            keep = tmp / "auto.npy" if label == "MSVMAv auto" and k == 0 else None
            r = _fitrun.run(path, algorithm, params, decisions=keep)
            results[label].append(r)
            print(f"  {label:<12} {r.get('path') or '':>5} {fmt(r)}", flush=True)
    anchor = _median(results["LinearSVC"])
    for label, _, _ in fits[1:]:
        subject = _median(results[label])
        if "error" in anchor or "error" in subject:
            continue
        goal = 3 * size + 300 * MB
        ratios = [s["seconds"] / a["seconds"] for a, s in zip(results["LinearSVC"],
                                                               results[label], strict=True)
                  if "error" not in a and "error" not in s]
        print(f"  {label}: time ratio to LinearSVC (medians of {repeat}) = "
              f"{subject['seconds'] / anchor['seconds']:.1f} (goal <= 2; pairs "
              f"{', '.join(f'{x:.1f}' for x in ratios)}); peak = "
              f"{subject['peak_bytes'] / MB:.0f} MB, goal 3 x data + 300 MB = {goal / MB:.0f} "
              f"MB ({'met' if subject['peak_bytes'] <= goal else 'missed'})")
    if floor and results["MSVMAv auto"][0].get("path") == "gram" and "error" not in anchor:
        floor = _median([_fitrun.run(path, "gram-floor", {}) for _ in range(repeat)])
        print(f"  gram floor (bias column, X_A^T X_A once, 100 products with it; no solve): "
              f"{floor['seconds']:.2f} s = {floor['seconds'] / anchor['seconds']:.1f} x "
              f"LinearSVC (medians of {repeat})")
    dense = estimate_fit("msvmav", n, d, X.nnz, {"linear_solver": "dense"})
    if not direct or dense.peak_bytes > DIRECT_LIMIT:
        why = "skipped (--no-direct)" if not direct else "does not fit"
        print(f"  dense D x D path: estimate {dense.peak_bytes / 2**30:.1f} GiB, {why}")
        return
    ref = _fitrun.run(path, "msvmav", {"linear_solver": "dense"}, decisions=tmp / "dense.npy")
    print(f"  MSVMAv dense       {fmt(ref)}")
    if "error" not in ref and "error" not in results["MSVMAv auto"][0]:
        gap = np.max(np.abs(np.load(tmp / "auto.npy") - np.load(tmp / "dense.npy")))
        print(f"  max |decision(auto) - decision(dense)| = {gap:.2e} (goal <= 1e-8)")


def sweep(n: int, widths: list[int], tmp: Path) -> None:
    print(f"\nd-sweep: {n} rows, {PER_ROW} stored values a row (nnz fixed)")
    print(f"  {'d':>9} {'path':>8} {'seconds':>8} {'peak MB':>8} {'estimate MB':>12} "
          f"{'data MB':>8}")
    for d in widths:
        X, y = planted(n, d)
        path = tmp / f"sweep-{d}.npz"
        _fitrun.save(path, X, y)
        r = _fitrun.run(path, "msvmav", {})
        est = estimate_fit("msvmav", n, d, X.nnz, {})
        if "error" in r:
            print(f"  {d:>9} FAILED {r['error']}")
            continue
        print(f"  {d:>9} {r['path']:>8} {r['seconds']:8.2f} {r['peak_bytes'] / MB:8.0f} "
              f"{est.peak_bytes / MB:12.0f} {_fitrun.data_bytes(X) / MB:8.0f}")
        path.unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="20k rows; sweep 1k-100k features")
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--no-direct", action="store_true", help="skip the dense-path comparison")
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--widths", type=int, nargs="*", default=None,
                   help="feature counts compared with LinearSVC (default 100000 2000)")
    p.add_argument("--repeat", type=int, default=1,
                   help="alternate LinearSVC and MSVMAv this many times (medians reported)")
    p.add_argument("--with-cg", action="store_true",
                   help="also time linear_solver='cg' where auto takes another path")
    p.add_argument("--no-floor", action="store_true",
                   help="skip the gram path's lower bound (its three extra fits)")
    args = p.parse_args()
    n = args.rows or (20_000 if args.quick else 100_000)
    widths = [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])
    with _fitrun.scratch() as tmp:
        for d in args.widths or (100_000, 2_000):
            compare(n, d, Path(tmp), not args.no_direct, args.repeat, args.with_cg,
                    not args.no_floor)
        if not args.no_sweep:
            sweep(n, widths, Path(tmp))


if __name__ == "__main__":
    main()
