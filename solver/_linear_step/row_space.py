"""The "woodbury" linear step: the step solved in the space of the active rows.

(c I + X_A^T X_A)^{-1} X_A^T e_A = X_A^T (c I + X_A X_A^T)^{-1} e_A (the push-through form of
the Woodbury identity), from the n x n row Gram matrix X X^T formed once: for few rows and many
features (n << D). Needs the identity metric (base = c, a constant).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, sparse

from .._footprint import FLOAT
from .._row_blocks import RowBlocks


class RowSpaceSystem:
    """(c I + X_A^T X_A)^{-1} X_A^T e_A = X_A^T (c I + X_A X_A^T)^{-1} e_A, via X X^T (n x n).

    Counters: ``cholesky_factorisations`` (the |A| x |A| block factored, once per new A)."""

    advice = "use linear_solver='cg' (memory O(nnz + n + D)) or fewer rows"

    def __init__(self, X, y: np.ndarray, base: np.ndarray, *, rows: RowBlocks | None = None,
                 bias: bool = False, update: str = "incremental") -> None:
        base = np.asarray(base, dtype=np.float64)
        if base.size and np.any(base != base.flat[0]):
            raise ValueError("linear_solver: 'woodbury' needs the identity metric")
        self.Xa, self.y = X, y
        self.c = float(base.flat[0]) if base.size else 0.0
        K = X @ X.T
        self.K = K.toarray() if sparse.issparse(K) else np.asarray(K)
        self.mask = np.zeros(X.shape[0], dtype=bool)
        self.idx = np.zeros(0, dtype=np.intp)
        self.factor = self.H = None
        self.counters = {"cholesky_factorisations": 0}

    @staticmethod
    def footprint(n: int, D: int, nnz: int | None) -> int:
        """Peak bytes: X X^T (its sparse product first, for CSR input), the block of A and its
        factor."""
        product = 0 if nnz is None else min(n * n, nnz * max(1, nnz // max(D, 1)))
        return FLOAT * 3 * n * n + 12 * product

    def followed(self) -> None:
        """X delta is not followed on this path: the margins are formed afresh."""
        return None

    def set_active(self, mask: np.ndarray) -> None:
        if self.factor is not None and np.array_equal(mask, self.mask):
            return
        np.copyto(self.mask, mask)
        self.idx = np.flatnonzero(mask)
        H = self.K[np.ix_(self.idx, self.idx)]
        H[np.diag_indices_from(H)] += self.c
        self.H = H
        self.factor = linalg.cho_factor(H, lower=True, check_finite=False)
        self.counters["cholesky_factorisations"] += 1

    def step(self, w: np.ndarray, theta: float, f: np.ndarray,
             gram_w: np.ndarray | None = None) -> np.ndarray:
        e = theta * self.y[self.idx] - f[self.idx]
        z = linalg.cho_solve(self.factor, e, check_finite=False)
        # one step of iterative refinement against K_AA (cheap: |A|^2)
        r = e - self.H @ z
        z += linalg.cho_solve(self.factor, r, check_finite=False)
        u = np.zeros(self.Xa.shape[0])
        u[self.idx] = z
        return np.asarray(self.Xa.T @ u).ravel()
