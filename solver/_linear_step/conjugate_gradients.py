"""The "cg" linear step: matrix-free preconditioned conjugate gradients on
v -> diag(c) v + X^T (1_A * (X v)).

Jacobi's preconditioner c + sum_{i in A} x_ij^2 is kept current as rows enter and leave A (and
with an intercept column, that column is eliminated exactly: see the class); each solve starts
from the previous two solutions extrapolated (``warm_start.WarmStart``). Memory O(n + D)
besides X; X is never densified and X^T X never formed.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._footprint import FLOAT
from .._row_blocks import RowBlocks
from .warm_start import WarmStart

# Conjugate gradients stop at ||residual|| <= CG_RTOL ||rhs||: on bench/wide.py's data the
# decisions then agree with the dense path to ~1e-13 and with a 1e-12 tolerance to 1e-13, in
# 214 CG iterations instead of 307 (100k x 100k) and 402 instead of 502 (100k x 2,000);
# CG_MAX_ITER caps the iterations per solve.
CG_RTOL = 1e-10
CG_MAX_ITER = 5000
# Rows squared at a time when the preconditioner is rebuilt (bounds the temporary copy).
CHUNK_BYTES = 16 * 2**20


def _row_chunks(X, rows: np.ndarray):
    """rows in pieces whose squared copy stays within CHUNK_BYTES."""
    n, D = X.shape
    per_row = (X.nnz / max(n, 1) * 12 if sparse.issparse(X) else FLOAT * D) or 1.0
    step = max(1, int(CHUNK_BYTES // per_row))
    for lo in range(0, rows.size, step):
        yield rows[lo:lo + step]


def column_sums(X, rows: np.ndarray, weights: np.ndarray,
                plain: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """(sum_k weights_k x_{rows_k, j}^2, and with ``plain`` sum_k weights_k x_{rows_k, j}) for
    every column j ((D,) arrays), chunk by chunk, from one gather of the rows."""
    D = X.shape[1]
    squares, sums = np.zeros(D), (np.zeros(D) if plain else None)
    for part in _row_chunks(X, np.arange(rows.size)):
        sub = X[rows[part]]
        if sparse.issparse(sub):
            weighted = sub.data * np.repeat(weights[part], np.diff(sub.indptr))
            squares += np.bincount(sub.indices, weights=sub.data * weighted, minlength=D)
            if plain:
                sums += np.bincount(sub.indices, weights=weighted, minlength=D)
        else:
            squares += weights[part] @ (sub * sub)
            if plain:
                sums += weights[part] @ sub
    return squares, sums


class ConjugateGradientSystem:
    """Matrix-free preconditioned CG on (diag(c) + X_A^T X_A) delta = X_A^T e_A; c is n beta
    (linear MSVMAv) or a vector (the low-rank kernel path's metric, as for PrimalSystem).

    The preconditioner is Jacobi's, c + diag(X_A^T X_A); with ``bias`` (X's last column is the
    constant 1 of the intercept) it also eliminates that column exactly: with
    z = X_A^T 1_A (the bias column of X_A^T X_A; its last entry is |A|) and m = c_D + |A|,
    P = L diag(d_S, m) L^T, L = [[I, z/m], [0, 1]], d_S = diag - z^2 / m (> c by Cauchy-Schwarz),
    i.e. Jacobi's on the Schur complement of the bias. On data of one sign (features scaled to
    [0, 1]) the bias couples with the mean row, the direction Jacobi's leaves worst conditioned:
    100,000 x 2,000 at beta = 0.25, the condition number 3.6 -> 1.2; at beta = 2^-10,
    2,341 -> 3.5.

    Counters: ``preconditioner_rebuilds`` (the diagonal summed afresh over A),
    ``preconditioner_updates`` (edited by the rows that changed), ``cg_iterations``."""

    advice = "use fewer rows or features (the copy of X is most of it)"

    def __init__(self, X, y: np.ndarray, base: float | np.ndarray, *,
                 rows: RowBlocks | None = None, bias: bool = False,
                 update: str = "incremental") -> None:
        n, D = X.shape
        self.Xa, self.y, self.bias = X, y, bias
        self.rows = rows if rows is not None else RowBlocks(X)  # X's products
        self.ones = np.zeros(D if bias else 0)  # X_A^T 1_A, kept with ``bias``
        self.schur = np.zeros(0)  # d_S, kept with ``bias``
        self.c = np.broadcast_to(np.asarray(base, dtype=np.float64), (D,)).copy()
        self.mask = np.zeros(n, dtype=bool)
        self.weights = np.zeros(n)  # 1.0 on A: a float mask for the products
        self.diag = self.c.copy()
        self.warm = WarmStart(np.zeros(D))
        self.Xv = np.zeros(0)  # X v for the last product's v (before masking by A)
        self.counters = {"preconditioner_rebuilds": 0, "preconditioner_updates": 0,
                         "cg_iterations": 0}

    @staticmethod
    def footprint(n: int, D: int, nnz: int | None) -> int:
        """Peak bytes: x, r, z, p, A p, the preconditioner (Jacobi's diagonal, X_A^T 1_A and
        the Schur diagonal), the previous two solutions and X_A^T X_A of each, rhs and the
        temporaries forming it; n-vectors (X x followed through the CG, and kept for the
        previous two solutions, among them); one chunk of rows squared for the preconditioner
        (a copy and its squares)."""
        data = FLOAT * n * D if nnz is None else 12 * nnz
        return FLOAT * (17 * D + 10 * n) + 2 * min(CHUNK_BYTES, data)

    def followed(self) -> np.ndarray | None:
        """X delta of the last step, followed through its CG (None: not followed)."""
        return self.warm.moved

    def set_active(self, mask: np.ndarray) -> None:
        changed = np.flatnonzero(mask != self.mask)
        if changed.size == 0:
            return
        rebuild = changed.size > mask.size // 4
        sign = np.where(mask[changed], 1.0, -1.0)
        self.warm.follow(lambda: self.Xa[changed], None if rebuild else sign)
        if rebuild:  # exact sums, no drift
            rows = np.flatnonzero(mask)
            squares, sums = column_sums(self.Xa, rows, np.ones(rows.size), self.bias)
            self.diag = self.c + squares
            self.ones = sums if self.bias else self.ones
            self.counters["preconditioner_rebuilds"] += 1
        else:
            squares, sums = column_sums(self.Xa, changed, sign, self.bias)
            self.diag += squares
            np.maximum(self.diag, self.c, out=self.diag)
            if self.bias:
                self.ones += sums
            self.counters["preconditioner_updates"] += 1
        np.copyto(self.mask, mask)
        self.weights = mask.astype(np.float64)
        self._keep_schur()

    def _keep_schur(self) -> None:
        """d_S of the class docstring, for the current A (``bias`` only)."""
        if self.bias:
            z, m = self.ones[:-1], self.diag[-1]
            if self.schur.shape != z.shape:
                self.schur = np.empty_like(z)
            np.multiply(z, z, out=self.schur)
            self.schur /= -m
            self.schur += self.diag[:-1]
            np.maximum(self.schur, self.c[:-1], out=self.schur)

    def _precondition(self, r: np.ndarray, out: np.ndarray) -> np.ndarray:
        """out = P^{-1} r (the class docstring's P), without D-sized temporaries."""
        if not self.bias:
            return np.divide(r, self.diag, out=out)
        z, m, head = self.ones[:-1], self.diag[-1], out[:-1]
        np.multiply(z, -r[-1] / m, out=head)
        head += r[:-1]
        head /= self.schur
        out[-1] = (r[-1] - float(z @ head)) / m
        return out

    def _apply(self, v: np.ndarray) -> np.ndarray:
        self.Xv = self.rows.matvec(v)
        out = self.rows.rmatvec(self.Xv * self.weights)
        out += self.c * v
        return out

    def step(self, w: np.ndarray, theta: float, f: np.ndarray,
             gram_w: np.ndarray | None = None) -> np.ndarray:
        """Solve for X_A^T e_A, e = theta y - f, from the warm start x: r = X_A^T (e - X x)_A
        - c x takes one pass over X^T (and one over X where X x is not known), and
        b = r + c x + X_A^T X_A x none where X_A^T X_A x is known (``WarmStart.guess``); else
        b is a second pass over X^T. The step's residual r = b - M x is computed from them, so
        the solve is exact up to their rounding; b only scales the stopping test, and is
        computed afresh if zero is the better start."""
        x, gx, Xx = self.warm.guess()
        if Xx is None:
            Xx = self.rows.matvec(x)
        e = theta * self.y - f
        e *= self.weights
        r = self.rows.rmatvec(e - self.weights * Xx)
        r -= self.c * x
        b = None if gx is None else r + self.c * x + gx
        if b is None or not np.linalg.norm(r) < np.linalg.norm(b):
            b = self.rows.rmatvec(e)
        return self._solve_warm(x, b, r, Xx)

    def _solve_warm(self, x: np.ndarray, b: np.ndarray, r: np.ndarray,
                    Xx: np.ndarray | None = None) -> np.ndarray:
        """The system solved for b from the start ``x`` (r = b - A x), or from zero when that
        is the better start; kept for the next steps' start. With ``Xx`` = X x, X x is
        followed through the iterations (from each product's X p) and kept."""
        b_norm = float(np.linalg.norm(b))
        if b_norm == 0.0:
            self.warm.moved = None if Xx is None else np.zeros_like(Xx)
            return np.zeros_like(x)
        if not np.linalg.norm(r) < b_norm:  # the warm start is worse than zero
            x[:] = 0.0
            r = b.copy()
            if Xx is not None:
                Xx[:] = 0.0
        self._iterate(x, r, CG_RTOL * b_norm, Xx)
        # X_A^T X_A x = b - r - c x (the recurrence's r: rounding, not the solve, apart)
        self.warm.record(x, b - r - self.c * x, Xx)
        return x.copy()

    def _iterate(self, x: np.ndarray, r: np.ndarray, target: float,
                 Xx: np.ndarray | None = None) -> None:
        """CG iterations in place on x and r (r = b - A x on entry), and on Xx = X x."""
        z = self._precondition(r, np.empty_like(r))
        p = z.copy()
        rz = float(r @ z)
        for _ in range(CG_MAX_ITER):
            if np.linalg.norm(r) <= target:
                return
            Ap = self._apply(p)
            step = rz / float(p @ Ap)
            x += step * p
            r -= step * Ap
            if Xx is not None:
                Xx += step * self.Xv
            self.counters["cg_iterations"] += 1
            self._precondition(r, z)
            rz_new = float(r @ z)
            p *= rz_new / rz
            p += z
            rz = rz_new
