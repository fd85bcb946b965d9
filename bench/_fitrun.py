"""One fit in a child process, with its time and its peak memory measured by RSS (shared by
bench/wide.py and bench/fit_memory.py).

The parent saves the data to an .npz file; the child loads it, resets the kernel's peak-RSS mark
(``/proc/self/clear_refs`` = 5, Linux), records its RSS, fits, and reports the fit's wall time and
``VmHWM - VmRSS before the fit``: the peak *extra* memory of fit(), beyond the loaded input,
including what C libraries (LIBLINEAR, LIBSVM, BLAS) allocate, which tracemalloc cannot see.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import sparse

ROOT = Path(__file__).resolve().parents[1]


def save(path: Path, X, y: np.ndarray) -> None:
    if sparse.issparse(X):
        X = sparse.csr_matrix(X)
        np.savez(path, data=X.data, indices=X.indices, indptr=X.indptr,
                 shape=np.asarray(X.shape), y=y)
    else:
        np.savez(path, X=X, y=y)


def load(path: Path):
    with np.load(path) as f:
        if "X" in f:
            return np.ascontiguousarray(f["X"]), f["y"]
        X = sparse.csr_matrix((f["data"], f["indices"], f["indptr"]), shape=tuple(f["shape"]))
        return X, f["y"]


def data_bytes(X) -> int:
    if sparse.issparse(X):
        return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return X.nbytes


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


class GramFloor:
    """What linear MSVMAv's "gram" path cannot avoid, timed as a fit: appending the bias
    column, X_A^T X_A for the first active set (the paper's w_0 = X^T y / ||X^T y||) and its
    margins, and one product with that D x D matrix for each of T = 100 iterations (a step's
    exact residual needs one), on the threads the fit uses (the products as the fit makes them:
    ``SymmetricProduct``, on one or two BLAS threads). No solve, no margins after the start,
    no active-set bookkeeping: a lower bound on the fit's time. On small pages, as a fit
    allocates (``solver._huge_pages``)."""

    def __init__(self) -> None:  # the imports outside the timed fit, as for the estimators
        from solver.internals import RowBlocks, SymmetricProduct, fit_threads, small_pages
        from solver.internals import rows_gram as _rows_gram
        from solver.msvmav import augment

        self.parts = (_rows_gram, RowBlocks, fit_threads, augment, SymmetricProduct)
        self.small_pages = small_pages

    def fit(self, X, y: np.ndarray) -> GramFloor:
        with self.small_pages():
            return self._fit(X, y)

    def _fit(self, X, y: np.ndarray) -> GramFloor:
        _rows_gram, RowBlocks, fit_threads, augment, Product = self.parts  # noqa: N806
        threads = fit_threads()
        Xa = augment(X)
        signed = np.where(y == y.max(), 1.0, -1.0)
        rows = RowBlocks(Xa, threads)
        w = rows.rmatvec(signed)
        w /= np.linalg.norm(w)
        margins = signed * rows.matvec(w)
        G = _rows_gram(Xa, margins < margins.mean(), threads)
        product = Product(threads, G.shape[0])
        for _ in range(100):
            product(G, w)
        return self


def child(spec_json: str) -> None:
    spec = json.loads(spec_json)
    X, y = load(Path(spec["data"]))
    if spec["algorithm"] == "linearsvc":
        from sklearn.svm import LinearSVC
        est = LinearSVC(**spec["params"])
    elif spec["algorithm"] == "svc":
        from sklearn.svm import SVC
        est = SVC(**spec["params"])
    elif spec["algorithm"] == "gram-floor":
        est = GramFloor()
    else:
        from solver import ALGORITHMS
        est = ALGORITHMS[spec["algorithm"]](**spec["params"])
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM") - before
    out = {"seconds": seconds, "peak_bytes": peak,
           "path": getattr(est, "linear_solver_", None) or getattr(
               est, "kernel_approximation_", None),
           "fit_info": {key: value for key, value in (getattr(est, "fit_info_", None) or {}).items()
                        if isinstance(value, int | float)}}
    if spec.get("holdout"):
        Xt, yt = load(Path(spec["holdout"]))
        out["accuracy"] = float(np.mean(est.predict(Xt) == yt))
    if spec.get("decisions"):
        np.save(spec["decisions"], est.decision_function(X))
    print(json.dumps(out))


def run(data: Path, algorithm: str, params: dict, *, decisions: Path | None = None,
        holdout: Path | None = None, timeout: float = 3600) -> dict:
    """Fit in a child process; {"seconds", "peak_bytes", "path"[, "accuracy"]} or
    {"error": message} when the child failed (e.g. MemoryError)."""
    spec = {"data": str(data), "algorithm": algorithm, "params": params,
            "decisions": str(decisions) if decisions else None,
            "holdout": str(holdout) if holdout else None}
    proc = subprocess.run([sys.executable, __file__, json.dumps(spec)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scratch() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="msvmav-bench-")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    child(sys.argv[1])
