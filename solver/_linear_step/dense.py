"""The "dense" linear step: (diag(base) + X_A^T X_A)^{-1} kept as a D x D array.

docs/algorithm.md, "The semi-variance step": w' = w + delta with
(c I + X_A^T X_A) delta = X_A^T e_A. ``PrimalSystem`` keeps G = X_A^T X_A, s_A = X_A^T y_A
and M = (diag(base) + G)^{-1}; the rows that enter or leave A change M by one mixed-sign
Woodbury update (all of them at once, BLAS-3), and M is inverted afresh when the change is
large or a solve's residual check fails. ``update="rebuild"`` inverts afresh every time (the
reference path; the same iterates).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._active_set import REFACTOR_SHARE, RESIDUAL_TOL
from .._footprint import FLOAT
from .._linalg import spd_inverse
from .._margin_bounds import margin_bounds_bytes
from .._row_blocks import RowBlocks

# Above this many changed rows per dimension, a sparse X's rows update G as a sparse product.
SPARSE_ROWS = 16
# How the dense system follows A: edited by Woodbury updates, or inverted afresh each time.
DENSE_UPDATES = ("incremental", "rebuild")
# ``moments`` declines (a pass over X instead) when more than n / MOMENTS_ROWS rows differ.
MOMENTS_ROWS = 16


def _gram(rows) -> np.ndarray:
    g = rows.T @ rows
    return g.toarray() if sparse.issparse(g) else np.asarray(g)


def dense_rows(X, idx: np.ndarray) -> np.ndarray:
    """X[idx] as a dense (len(idx), d) array; for CSR without scipy's per-call overhead
    (this runs every iteration with a handful of rows)."""
    if not sparse.issparse(X):
        return X[idx]
    if idx.size <= 16:  # a Python loop over a few rows beats ten vectorised set-up calls
        out = np.zeros((idx.size, X.shape[1]))
        indptr, indices, data = X.indptr, X.indices, X.data
        for r, i in enumerate(idx.tolist()):
            lo, hi = indptr[i], indptr[i + 1]
            out[r, indices[lo:hi]] = data[lo:hi]
        return out
    starts = X.indptr[idx]
    lengths = X.indptr[idx + 1] - starts
    total = int(lengths.sum())
    first = np.cumsum(lengths) - lengths
    pos = np.arange(total) + np.repeat(starts - first, lengths)
    out = np.zeros((idx.size, X.shape[1]))
    out[np.repeat(np.arange(idx.size), lengths), X.indices[pos]] = X.data[pos]
    return out


class PrimalSystem:
    """(diag(base) + X_A^T X_A)^{-1}: base = c for linear MSVMAv, c (1 + sigma^2) for the
    low-rank (Nystroem) kernel path in its rotated coordinates.

    Also keeps s_A = X_A^T y_A, so the step's right-hand side
    X_A^T e_A = theta s_A - G w costs O(D^2) instead of a pass over the data.

    Counters: ``inverse_builds`` (M inverted from G afresh), ``inverse_updates`` (M edited by
    a Woodbury update for the rows that changed)."""

    advice = "use linear_solver='cg' (memory O(nnz + n + D)) or fewer features"

    def __init__(self, X, y: np.ndarray, base: np.ndarray, *, rows: RowBlocks | None = None,
                 bias: bool = False, update: str = "incremental") -> None:
        if update not in DENSE_UPDATES:
            raise ValueError(f"update: {update!r} is not one of {DENSE_UPDATES}")
        self.Xa, self.y, self.base, self.update = X, y, base, update
        n, D = X.shape
        self.D = D
        self.mask = np.zeros(n, dtype=bool)
        self.G = np.zeros((D, D))
        self.sA = np.zeros(D)
        self.M = np.diag(1.0 / base)
        self.counters = {"inverse_builds": 0, "inverse_updates": 0}

    @staticmethod
    def footprint(n: int, D: int, nnz: int | None) -> int:
        """Peak bytes: G, M and the matrix being inverted; rows entering A densified (at most
        16 D of them for CSR input, all n for dense input), and their signed copy; the
        margins' bounds (``_margin_bounds``: linear MSVMAv summarises its margins from them)."""
        rows = n if nnz is None else min(n, 16 * D)
        return FLOAT * (3 * D * D + 2 * rows * D) + margin_bounds_bytes(n, D)

    def followed(self) -> None:
        """X delta is not followed on this path: the margins are formed afresh."""
        return None

    def moments(self, mask: np.ndarray, w: np.ndarray
                ) -> tuple[float, float, np.ndarray] | None:
        """(w^T G_M w, s_M . w, G_M w) for a set M (``mask``) without changing the system: from
        G and s_A of the current A and the rows where M and A differ
        (``_margin_bounds.Moments``); None where more than n / MOMENTS_ROWS rows differ (a pass
        over X is cheaper then)."""
        differ = np.flatnonzero(mask != self.mask)
        if differ.size * MOMENTS_ROWS > mask.size:
            return None
        gw = self.G @ w
        s = self.sA
        if differ.size:
            sign = np.where(mask[differ], 1.0, -1.0)
            U = dense_rows(self.Xa, differ)
            gw += (sign * (U @ w)) @ U
            s = s + (sign * self.y[differ]) @ U
        return float(w @ gw), float(s @ w), gw

    def _invert(self) -> None:
        H = self.G.copy()
        H[np.diag_indices_from(H)] += self.base
        self.M = spd_inverse(H, overwrite=True)
        self.counters["inverse_builds"] += 1

    def _rebuild(self) -> None:
        """G and s_A from scratch, then invert: the reference path, and the cure for drift."""
        rows = self.Xa[self.mask]
        self.G = _gram(rows)
        self.sA = np.asarray(rows.T @ self.y[self.mask]).ravel()
        self._invert()

    def set_active(self, mask: np.ndarray) -> None:
        if self.update == "rebuild":
            self.mask = mask.copy()
            self._rebuild()
            return
        changed = np.flatnonzero(mask != self.mask)  # rows that entered or left
        if changed.size == 0:
            return
        np.copyto(self.mask, mask)
        sign = np.where(mask[changed], 1.0, -1.0)
        if changed.size > REFACTOR_SHARE * self.D:
            self._add_rows(changed, sign)
            self._invert()
            return
        self._woodbury(changed, sign)

    def _add_rows(self, changed: np.ndarray, sign: np.ndarray) -> None:
        """G and s_A change by the rows that entered minus the rows that left (exact sums)."""
        if sparse.issparse(self.Xa) and changed.size > SPARSE_ROWS * self.D:
            for part, op in ((changed[sign > 0], np.add), (changed[sign < 0], np.subtract)):
                if part.size:
                    rows = self.Xa[part]
                    op(self.sA, np.asarray(rows.T @ self.y[part]).ravel(), out=self.sA)
                    op(self.G, (rows.T @ rows).toarray(), out=self.G)
        else:  # a few hundred rows: dense BLAS beats a sparse product's set-up
            U = dense_rows(self.Xa, changed)  # p x D
            self.sA += (sign * self.y[changed]) @ U
            self.G += U.T @ (U * sign[:, None])

    def _woodbury(self, changed: np.ndarray, sign: np.ndarray) -> None:
        """M <- M - M U (S + U^T M U)^{-1} U^T M, S = diag(+-1) = S^{-1}, U the changed rows."""
        p = changed.size
        U = dense_rows(self.Xa, changed).T  # D x p
        self.sA += U @ (sign * self.y[changed])
        self.G += (U * sign) @ U.T
        MU = self.M @ U
        inner = U.T @ MU
        inner.flat[:: p + 1] += sign
        self.M -= MU @ np.linalg.solve(inner, MU.T)
        self.M += self.M.T
        self.M *= 0.5
        self.counters["inverse_updates"] += 1

    def step(self, w: np.ndarray, theta: float, f: np.ndarray | None = None,
             gram_w: np.ndarray | None = None) -> np.ndarray:
        """delta solving (diag(base) + G) delta = X_A^T (theta y_A - X_A w) = theta s_A - G w
        (``f`` = X w is not needed here; the other linear steps take it)."""
        return self.solve(theta * self.sA - self.G @ w)

    def _residual(self, rhs: np.ndarray, x: np.ndarray) -> np.ndarray:
        return rhs - (self.base * x + self.G @ x)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        x = self.M @ rhs
        if self.update == "rebuild":
            return x
        scale = np.linalg.norm(rhs)
        r = self._residual(rhs, x)
        if np.linalg.norm(r) <= RESIDUAL_TOL * scale:
            return x
        x = x + self.M @ r  # one step of iterative refinement
        if np.linalg.norm(self._residual(rhs, x)) <= RESIDUAL_TOL * scale:
            return x
        self._rebuild()
        return self.M @ rhs
