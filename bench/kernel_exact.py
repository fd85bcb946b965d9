"""The exact RBF path of MSVMAv beside scikit-learn's SVC() on the same rows (issue 49, "small
data is fast"), with where its time goes.

    .venv/bin/python bench/kernel_exact.py                      # magic, n = 690, 2,000, 5,000
    .venv/bin/python bench/kernel_exact.py --sizes 690 2000 --datasets magic phishing
    .venv/bin/python bench/kernel_exact.py --hard 16            # + gamma = 16 x "scale"

Per data set and n (a stratified sample of n rows, seed 0, min-max scaled): the time of
``SVC()`` (C = 1, gamma="scale") and of ``MSVMAv(kernel="rbf", approximation="exact")`` on the
default stopping rule (``stop="objective"``, tol 1e-4, max_iter 100) and on the paper's
(``PAPER_STOPPING``: T = 100, step < 1e-8), each with its ratio to SVC's time in the same
process; the iterations run and whether the rule was met; then the exact fit's parts: the Gram
matrix (one BLAS thread, as the fit computes it), the inverse of I + K (``DualSystem.pair``)
and the rest (the iterations: the |A| x |A| system's edits and the steps), and one Cholesky
factorisation of I + K (the least work of any exact solve of the n x n system, beside
SVC's time). ``--hard F`` adds
rows at gamma = F x "scale" (a kernel whose spectrum decays slowly: numerical rank near n),
where SVC() is run with the same gamma. Times are wall clock, best of ``--repeat``; the
machine's CPU (lscpu's model name) and BLAS are printed first.

A second table (``--floor``) times, in the same process as that row's SVC(), the pieces any
exact computation of the fit needs, each on one BLAS thread and as a ratio to SVC()'s time:
the Gram matrix; one Cholesky factorisation of I + K in float64 and in float32 (the start of
a float32 factorisation with float64 refinement); the inverse (potrf + potri, what the fit
takes); 100 passes over the n x |A| float64 block K_{:,A} (|A| the default fit's mean active
set: one pass an iteration is the least any exact step reads, the fit reads two, K_{:,A} and
(I + K)^{-1}_{:,A}); 100 products K v (one a Krylov iteration); and the numerical rank of K
(eigenvalues past which the tail's sum is below 1e-12 of the trace: the rank a pivoted
Cholesky factor needs to be exact within that), for n <= 2,000 (eigvalsh's cost).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402
from scipy.linalg import lapack  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import MinMaxScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from app.ingest import parse_dataset  # noqa: E402
from solver import MSVMAv  # noqa: E402
from solver.internals import DualSystem  # noqa: E402
from solver.kernels import gram_matrix, resolve_gamma  # noqa: E402
from solver.msvmav_parameters import PAPER_STOPPING  # noqa: E402

FILES = {"magic": ("magic04.data", {}), "phishing": ("phishing_TrainingDataset.arff", {}),
         "kc1": ("kc1.arff", {}), "bank": ("bank-full.csv", {})}


def _data_dir() -> Path:
    if os.environ.get("MSVMAV_DATASETS"):
        return Path(os.environ["MSVMAV_DATASETS"])
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "datasets").is_dir():
            return parent / "shared" / "datasets"
    return Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no lscpu)"
    names = [line.split(":", 1)[1].strip() for line in out.splitlines()
             if line.startswith("Model name")]
    return names[0] if names else "unknown"


def load(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n rows of the data set (stratified, seed 0), min-max scaled."""
    filename, options = FILES[name]
    parsed = parse_dataset((_data_dir() / filename).read_bytes(), filename, **options)
    X = parsed.X.toarray() if hasattr(parsed.X, "toarray") else np.asarray(parsed.X)
    y = np.asarray(parsed.y)
    if n < y.size:
        X, _, y, _ = train_test_split(X, y, train_size=n, random_state=0, stratify=y)
    return MinMaxScaler().fit_transform(X), y


def best_of(repeat: int, fn):
    best, out = np.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def parts(X: np.ndarray, gamma: float, repeat: int) -> tuple[float, float, float]:
    """Seconds of the exact fit's Gram matrix (one BLAS thread), of (I + K)^{-1}, and of one
    Cholesky factorisation of I + K in place (LAPACK potrf): the floor of any exact solve."""
    with threadpool_limits(1):
        gram_t, K = best_of(repeat, lambda: gram_matrix(X, kernel="rbf", gamma=gamma))
    inverse_t, _ = best_of(repeat, lambda: DualSystem.pair(K))

    def cholesky() -> None:
        B = K.copy()
        B[np.diag_indices_from(B)] += 1.0
        lapack.dpotrf(B.T, lower=1, overwrite_a=1, clean=0)  # B.T: the same memory, Fortran

    return gram_t, inverse_t, best_of(repeat, cholesky)[0]


def numerical_rank(K: np.ndarray, tail: float = 1e-12) -> int:
    """The eigenvalues of K past which the rest sum to at most ``tail`` of the trace."""
    lam = np.clip(np.linalg.eigvalsh(K)[::-1], 0.0, None)
    rest = np.cumsum(lam[::-1])[::-1]  # rest[r] = sum of lam[r:]
    small = np.flatnonzero(rest <= tail * lam.sum())
    return int(small[0]) if small.size else K.shape[0]


def floor_row(X: np.ndarray, gamma: float, active: int, svc_t: float, repeat: int) -> str:
    """The pieces of any exact fit, each timed on one thread, against SVC()'s time."""
    with threadpool_limits(1):
        gram_t, K = best_of(repeat, lambda: gram_matrix(X, kernel="rbf", gamma=gamma))
        B = K.copy()
        B[np.diag_indices_from(B)] += 1.0
        B32 = B.astype(np.float32)
        times = {"Gram": gram_t,
                 "potrf": best_of(repeat, lambda: lapack.dpotrf(B.T.copy(order="F"), lower=1,
                                                                overwrite_a=1, clean=0))[0],
                 "spotrf": best_of(repeat, lambda: lapack.spotrf(B32.T.copy(order="F"),
                                                                 lower=1, overwrite_a=1,
                                                                 clean=0))[0],
                 "(I+K)^-1": best_of(repeat, lambda: DualSystem.pair(K))[0]}
        KA = np.ascontiguousarray(K[:active])
        z, v = np.ones(active), np.ones(K.shape[0])
        times["100 x K_A pass"] = best_of(repeat, lambda: [z @ KA for _ in range(100)])[0]
        times["100 x K v"] = best_of(repeat, lambda: [K @ v for _ in range(100)])[0]
    rank = numerical_rank(K) if K.shape[0] <= 2000 else None
    cells = " | ".join(f"{t:.3f} ({t / svc_t:.2f}x)" for t in times.values())
    least = times["Gram"] + times["potrf"] + times["100 x K_A pass"]
    return (f"{cells} | {least:.3f} ({least / svc_t:.2f}x) | "
            f"{'-' if rank is None else rank} of {K.shape[0]} |")


def one(name: str, n: int, factor: float | None, repeat: int, floors: list[str]) -> None:
    X, y = load(name, n)
    scale = resolve_gamma("scale", X)
    gamma = scale if factor is None else factor * scale
    svc_gamma = "scale" if factor is None else gamma
    svc_t, svc = best_of(repeat, lambda: SVC(gamma=svc_gamma).fit(X, y))
    cells = []
    for rule, params in (("default", {}), ("paper", PAPER_STOPPING)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning: the table says it
            t, model = best_of(repeat, lambda p=params: MSVMAv(
                kernel="rbf", gamma=gamma, approximation="exact", **p).fit(X, y))
        cells.append(f"{t:.3f} | {t / svc_t:.1f}x | {model.n_iter_} "
                     f"{'met' if model.converged_ else 'not met'}")
        if rule == "default":
            default_t = t
            active = int(np.mean([r["active"] for r in model.history_]))
    gram_t, inverse_t, cholesky_t = parts(X, gamma, repeat)
    rest = max(default_t - gram_t - inverse_t, 0.0)
    width = "scale" if factor is None else f"{factor:g} x scale"
    print(f"| {name} | {X.shape[0]} x {X.shape[1]} | {width} ({gamma:.3g}) | {svc_t:.3f} "
          f"({svc.n_support_.sum()} SV) | {' | '.join(cells)} | {gram_t:.3f} / "
          f"{inverse_t:.3f} / {rest:.3f} | {cholesky_t:.3f} ({cholesky_t / svc_t:.1f}x) |",
          flush=True)
    if floors is not None:
        floors.append(f"| {name} | {X.shape[0]} | {width} | {svc_t:.3f} | {active} | "
                      + floor_row(X, gamma, active, svc_t, repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["magic"], choices=sorted(FILES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[690, 2000, 5000])
    parser.add_argument("--hard", type=float, default=None,
                        help="also fit at gamma = HARD x 'scale' (slow spectral decay)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--floor", action="store_true",
                        help="also time the pieces any exact fit needs (second table)")
    args = parser.parse_args()
    blas = sorted({f"{p['internal_api']} {p.get('version')} ({p['num_threads']} threads)"
                   for p in threadpool_info() if p["user_api"] == "blas"})
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; BLAS: {', '.join(blas)}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| data | n x d | gamma | SVC() s | default rule s | / SVC | iterations | "
          "paper rule s | / SVC | iterations | default fit: Gram / (I+K)^-1 / iterations s | "
          "potrf(I+K) s (/ SVC) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    floors: list[str] | None = [] if args.floor else None
    for name in args.datasets:
        for n in args.sizes:
            one(name, n, None, args.repeat, floors)
            if args.hard:
                one(name, n, args.hard, args.repeat, floors)
    if floors:
        print("\n| data | n | gamma | SVC() s | mean abs(A) | Gram s | potrf(I+K) s | "
              "spotrf(I+K) s | (I+K)^-1 s | 100 K_{:,A} passes s | 100 K v s | "
              "Gram + potrf + passes s | rank (tail <= 1e-12 trace) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(floors))


if __name__ == "__main__":
    main()
