"""Benchmark: kernel approximation="auto" against SVC, and the cost model's constants.

    .venv/bin/python bench/fit_cost.py                 # 12,500 x 28 case and magic: SVC vs auto
    .venv/bin/python bench/fit_cost.py --exact         # + the exact model's accuracy (minutes)
    .venv/bin/python bench/fit_cost.py --calibrate     # measured seconds per unit of work

Default run (issue 30 point 1): on the issue's 12,500 rows x 28 uniform features with labels
from a noisy linear rule (80 % to train, gamma = 1/28) and on magic (../shared/datasets, 80/20
seeded split, min-max scaled, gamma = 1/d), SVC(C=1) and MSVMAv(kernel="rbf") with the default
approximation="auto" are fitted alternately ``--repeat`` times in this process; printed: best
fit time of each, their ratio (goal <= 1), hold-out accuracies, auto's rank, trace error and
recorded decision, and with ``--exact`` the exact model's hold-out accuracy (goal: auto within
0.5 points). ``--calibrate`` times each term of ``solver.fit_cost`` (Gram matrix, inverse,
exact iteration, pivots, feature iteration) on this machine and prints seconds per unit of
work beside the constants in the module.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from solver import MSVMAv, fit_cost  # noqa: E402
from solver.internals import DualSystem  # noqa: E402
from solver.kernels import gram_matrix  # noqa: E402
from solver.low_rank import pivoted_cholesky  # noqa: E402


def uniform_linear_rule(n: int = 12_500, d: int = 28, seed: int = 0, noise: float = 0.3):
    """Issue 30's case: uniform features, y = sign((x - 0.5) . w + noise), 80 % to train."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    s = (X - 0.5) @ rng.normal(size=d)
    y = np.where(s + noise * s.std() * rng.normal(size=n) > 0, 1, -1)
    m = int(0.8 * n)
    return X[:m], y[:m], X[m:], y[m:]


def magic():
    """magic04 as bench/solver.py splits it: 80/20 (seed 0), min-max scaled on the train part."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    from app.ingest import parse_dataset

    path = next((p / "shared" / "datasets" / "magic04.data"
                 for p in Path(__file__).resolve().parents
                 if (p / "shared" / "datasets" / "magic04.data").is_file()), None)
    if path is None:
        raise SystemExit("magic04.data not found under a shared/datasets folder")
    parsed = parse_dataset(path.read_bytes(), path.name)
    X = parsed.X.toarray() if hasattr(parsed.X, "toarray") else parsed.X
    Xtr, Xte, ytr, yte = train_test_split(X, parsed.y, test_size=0.2, random_state=0)
    scaler = MinMaxScaler().fit(Xtr)
    return scaler.transform(Xtr), ytr, np.clip(scaler.transform(Xte), 0, 1), yte


def compare(name: str, data, repeat: int, exact: bool) -> None:
    Xtr, ytr, Xte, yte = data
    gamma = 1.0 / Xtr.shape[1]
    best = {"svc": np.inf, "auto": np.inf}
    models = {}
    for _ in range(repeat):  # alternated, so both see the same load
        for key, make in (("svc", lambda: SVC(C=1, gamma=gamma)),
                          ("auto", lambda: MSVMAv(kernel="rbf", gamma=gamma, random_state=0))):
            t = time.perf_counter()
            models[key] = make().fit(Xtr, ytr)
            best[key] = min(best[key], time.perf_counter() - t)
    auto, svc = models["auto"], models["svc"]
    line = (f"| {name} | {Xtr.shape[0]} x {Xtr.shape[1]} | {best['svc']:.2f} | "
            f"{svc.score(Xte, yte):.4f} | {best['auto']:.2f} | {auto.score(Xte, yte):.4f} | "
            f"**{best['auto'] / best['svc']:.2f}** | {auto.kernel_approximation_} rank "
            f"{auto.rank_}, error {auto.kernel_error_:.2g}, "
            f"{auto.fit_info_.get('rank_choice')} |")
    if exact:
        t = time.perf_counter()
        ref = MSVMAv(kernel="rbf", gamma=gamma, approximation="exact").fit(Xtr, ytr)
        acc = ref.score(Xte, yte)
        line += (f" {acc:.4f} ({time.perf_counter() - t:.0f} s); auto - exact = "
                 f"{100 * (auto.score(Xte, yte) - acc):+.2f} points |")
    print(line, flush=True)
    print(f"  reason: {auto.fit_info_.get('rank_reason')}", flush=True)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def calibrate() -> None:
    """Seconds per unit of each cost term, measured here."""
    rng = np.random.default_rng(0)
    rows = []
    n, d = 4000, 28
    X = rng.random((n, d))
    y = np.where(X[:, 0] > 0.5, 1.0, -1.0)
    K = None

    def gram():
        nonlocal K
        K = gram_matrix(X, kernel="rbf", gamma=1 / d)

    rows.append(("GRAM", _timed(gram) / (n * n * d), fit_cost.GRAM))
    rows.append(("INVERSE", _timed(lambda: DualSystem.pair(K)) / n**3, fit_cost.INVERSE))
    m = MSVMAv(kernel="rbf", gamma=1 / d, approximation="exact", max_iter=20, tol=0)
    total = _timed(lambda: m.fit(X, y))
    rest = total - rows[0][1] * n * n * d - rows[1][1] * n**3
    rows.append(("EXACT_STEP", max(rest, 0.0) / (n * n * 20), fit_cost.EXACT_STEP))
    n, r = 10_000, 400
    Xl = rng.random((n, d))
    yl = np.where(Xl[:, 0] > 0.5, 1.0, -1.0)
    piv = _timed(lambda: pivoted_cholesky(Xl, kernel="rbf", gamma=1 / d, tol=0.0, max_rank=r,
                                          random_state=0))
    rows.append(("PIVOT", piv / (n * r * (d + r)), fit_cost.PIVOT))
    lr = MSVMAv(kernel="rbf", gamma=1 / d, approximation="low_rank", n_components=r,
                kernel_memory_mb=1.0 * n * n * 8 * 3 / 2**20, max_iter=50, tol=0,
                random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        total = _timed(lambda: lr.fit(Xl, yl))
    rows.append(("FEATURE_STEP", max(total - piv, 0.0) / (n * r * 50), fit_cost.FEATURE_STEP))
    print("| term | measured s / unit | solver.fit_cost |\n|---|---|---|")
    for name, measured, constant in rows:
        print(f"| {name} | {measured:.3g} | {constant:.3g} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--exact", action="store_true", help="also fit the exact model (minutes)")
    p.add_argument("--calibrate", action="store_true")
    p.add_argument("--data", nargs="+", choices=("uniform", "magic"),
                   default=["uniform", "magic"], help="which of the two cases (default both)")
    args = p.parse_args()
    if args.calibrate:
        calibrate()
        return
    print("| data | train rows x d | SVC s | SVC acc | auto s | auto acc | auto / SVC | "
          "auto's path |" + (" exact acc |" if args.exact else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if args.exact else ""))
    if "uniform" in args.data:
        compare("uniform, noisy linear rule", uniform_linear_rule(), args.repeat, args.exact)
    if "magic" in args.data:
        compare("magic", magic(), args.repeat, args.exact)


if __name__ == "__main__":
    main()
