"""Products with a large CSR matrix on every core the fit may use.

scipy's sparse kernels release the GIL, so a CSR matrix cut into contiguous row blocks of about
equal stored values has its products computed block by block in threads: X v as the blocks'
pieces side by side, X^T u as the sum of the blocks' X_b^T u_b. The blocks are views of X's
arrays (no copy of the data). Measured on 100k x 2,000 with 50 values a row, two cores: X v
4.9 ms -> 2.2 ms when X is read in a loop; inside a fit, where other work evicts X from the
cache between two products and memory bandwidth bounds them, 6.4 -> 5.3 ms. The Gram build
(compute-bound) halves, and the "cg" path's fit at 100k x 100k did too.

The thread count follows the BLAS limit in force where the fit starts (``fit_threads``): one
inside joblib's worker processes or a ``threadpool_limits(1)`` block, so the solver never
oversubscribes the cores it was given.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy
from scipy import sparse
from threadpoolctl import ThreadpoolController

# Below this many stored values a product takes well under a millisecond: one thread.
PARALLEL_MIN_NNZ = 2**20
# At most this many blocks (and threads), whatever the machine: each Gram block holds a D x D
# array while it is summed.
MAX_THREADS = 4

# The process's one view of its thread pools (BLAS, OpenMP): inspecting the loaded libraries
# costs ~20 ms, so every module of the solver asks this one.
THREADPOOLS = ThreadpoolController()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """A forked child has none of its parent's threads: it starts a pool of its own."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def fit_threads() -> int:
    """Threads a fit may use here: the BLAS limit in force (threadpoolctl's, or the one joblib
    sets in its workers), at most MAX_THREADS and the cores."""
    counts = [lib.num_threads for lib in THREADPOOLS.select(user_api="blas").lib_controllers]
    limit = max(counts) if counts else 1
    return max(1, min(limit, MAX_THREADS, os.cpu_count() or 1))


def scipy_blas() -> list:
    """threadpoolctl's controllers of the BLAS ``scipy.linalg.blas`` calls: the libraries
    installed with scipy (a wheel's own OpenBLAS), or every BLAS loaded where scipy brought none
    (one system BLAS shared with numpy)."""
    libs = THREADPOOLS.select(user_api="blas").lib_controllers
    home = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(scipy.__file__))),
                        "scipy")
    own = [lib for lib in libs if os.path.realpath(lib.filepath or "").startswith(home)]
    return own or libs


def run_parallel(fn, items: list) -> list:
    """[fn(item) for item in items], the items in threads of one shared pool."""
    global _pool
    if len(items) < 2:
        return [fn(item) for item in items]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="msvmav-rows")
        pool = _pool
    return list(pool.map(fn, items))


def split_rows(indptr: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Contiguous row ranges [lo, hi) holding about equal numbers of stored values (``indptr``
    may be a slice of a larger matrix's: it need not start at 0)."""
    n = indptr.size - 1
    targets = np.linspace(indptr[0], indptr[-1], parts + 1)[1:-1]
    cuts = np.r_[0, np.searchsorted(indptr, targets), n]
    return [(int(lo), int(hi)) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True) if hi > lo]


def sparse_view(kind: type, shape: tuple[int, int], arrays: tuple) -> sparse.spmatrix:
    """A CSR or CSC matrix on the given (indptr, indices, data) without copying them: set on an
    empty matrix, because the constructor copies a view of less than half an array (scipy's
    prune), and so does ``.T`` of such a matrix, on every call."""
    matrix = kind(shape, dtype=arrays[2].dtype)
    matrix.indptr, matrix.indices, matrix.data = arrays
    return matrix


class RowBlocks:
    """X (n x D) and its row blocks; ``matvec`` / ``rmatvec`` equal X @ v / X.T @ u.

    One block (no threads) for dense X, for CSR X with fewer than PARALLEL_MIN_NNZ values, or
    when the fit may use one thread."""

    def __init__(self, X, threads: int = 1) -> None:
        self.X, self.XT, self.threads = X, X.T, threads
        # (first row, end row, the rows as CSR, their transpose as CSC)
        self.blocks: list[tuple[int, int, sparse.csr_matrix, sparse.csc_matrix]] = []
        if sparse.isspmatrix_csr(X) and threads > 1 and X.nnz >= PARALLEL_MIN_NNZ:
            D = X.shape[1]
            for lo, hi in split_rows(X.indptr, threads):
                a, b = X.indptr[lo], X.indptr[hi]
                arrays = (X.indptr[lo:hi + 1] - a, X.indices[a:b], X.data[a:b])
                self.blocks.append((lo, hi, sparse_view(sparse.csr_matrix, (hi - lo, D), arrays),
                                    sparse_view(sparse.csc_matrix, (D, hi - lo), arrays)))

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """X v as a 1-d array."""
        if not self.blocks:
            return np.asarray(self.X @ v).ravel()
        out = np.empty(self.X.shape[0])

        def one(item) -> None:
            lo, hi, block, _ = item
            out[lo:hi] = block @ v

        run_parallel(one, self.blocks)
        return out

    def rmatvec(self, u: np.ndarray) -> np.ndarray:
        """X^T u: a 1-d array for 1-d u, (D, k) for (n, k) u."""
        if not self.blocks:
            out = np.asarray(self.XT @ u)
            return out.ravel() if u.ndim == 1 else out
        parts = run_parallel(lambda item: item[3] @ u[item[0]:item[1]], self.blocks)
        total = np.asarray(parts[0], dtype=np.float64).copy()
        for part in parts[1:]:
            total += part
        return total
