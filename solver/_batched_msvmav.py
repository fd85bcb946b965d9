"""Linear MSVMAv for many (alpha, beta) settings at once, on one training set (for model selection).

The iteration is ``solver._msvmav_core.iterate`` itself (docs/algorithm.md, "The iteration"),
run on a *space* of a stack of B settings that share the data (``StackSpace``): theta, the
strict active sets, the sign safeguard, the average-margin step, the normalisation, the
stopping rule and the error for a zero class sum are the core's; a setting whose step falls
below tol leaves the stack. What the space does for the stack:

* everything that does not depend on (alpha, beta) is computed once: the augmented rows, the
  signed class sum s = X^T y, the start w0 = s / ||s||, its margins and active set, and the
  active-set Gram matrix G_0 = X_A0^T X_A0;
* the products with the data are shared: one pass M = diag(y) X [w_1 ... w_B] per iteration gives
  the margins of every setting, instead of B matrix-vector products;
* per setting only O(D^2) state is kept dense: G_b = X_A^T X_A and s_A = X_A^T y_A. When the
  active sets change, all G_b and s_A are edited in one sparse product
  Delta @ Z, where Delta (B x n) holds +1 / -1 for the rows that entered / left A_b and
  Z (n x (D(D+1)/2 + D)) holds the packed upper triangle of x_i x_i^T and y_i x_i for each row
  (a setting whose active set changed more than its smaller side is rebuilt from that side
  instead). Data with dense rows and a large D edit each G_b with dense rank-p products instead;
* the semi-variance step (n beta I + G_b) delta = theta s_A - G_b w is solved afresh for all
  settings by one batched LAPACK call (no maintained inverse, so nothing drifts).

Only the rounding differs from ``MSVMAv(kernel="linear")`` (the linear systems are factorised
rather than updated, the margins are recomputed from w_k rather than propagated): on a9a's
first fold the weights agree with single fits to 1e-9 on 118 of the paper's 121 settings, to
1.4e-9 on two more, and to 3.8e-5 on alpha = 16, beta = 2^-10 (an ill-conditioned step; the
predictions on every training row are the same).

It pays for itself: on a9a's first fold the 121 settings, in model selection's batches of at
most 32, run x1.5 faster in lockstep than fitted one by one (bench/linear_step.py --part batch,
same run, alternately, one BLAS thread; docs/performance.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import sparse

from ._base import canonical
from ._msvmav_core import iterate, undefined_direction
from .msvmav import augment

# Build the packed outer-product matrix Z when it has at most this many stored values.
PAIR_BUDGET = 40_000_000
# Active-set states remembered per setting.
HISTORY = 4


def _csr(X) -> sparse.csr_matrix:
    """CSR float64 with sorted indices and no duplicates (summed on a copy if needed)."""
    return canonical(sparse.csr_matrix(X, dtype=np.float64))


def packed_outer_rows(X: sparse.csr_matrix, D: int) -> sparse.csr_matrix:
    """Row i = the upper triangle (j <= k, row-major) of x_i x_i^T, packed: n x D(D+1)/2."""
    indptr, indices, data = X.indptr, X.indices, X.data
    n = X.shape[0]
    r = np.diff(indptr)
    nnz = indices.size
    row_of = np.repeat(np.arange(n), r)
    pos = np.arange(nnz) - indptr[row_of]
    counts = r[row_of] - pos  # partners at positions pos..r-1 of the same row
    total = int(counts.sum())
    first = np.repeat(np.arange(nnz), counts)
    starts = np.cumsum(counts) - counts
    partner = first + (np.arange(total) - np.repeat(starts, counts))
    j = indices[first].astype(np.int64)
    k = indices[partner].astype(np.int64)
    cols = j * D - (j * (j - 1)) // 2 + (k - j)
    vals = data[first] * data[partner]
    row_ptr = np.concatenate([[0], np.cumsum(r * (r + 1) // 2)])
    return sparse.csr_matrix((vals, cols, row_ptr), shape=(n, D * (D + 1) // 2))


class _Data:
    """What every setting shares: augmented rows, labels, class sums, the packed Gram rows.

    Per setting the active-set state is one packed vector P_b = [upper(X_A^T X_A), X_A^T y_A]
    of length D(D+1)/2 + D. ``Z`` has one such row per training row (the packed x_i x_i^T and
    y_i x_i), so P_b = Z[A_b].sum(axis=0), and edits are signed sums of rows of Z."""

    def __init__(self, X, y: np.ndarray, fit_intercept: bool = True) -> None:
        Xa = augment(X) if fit_intercept else X
        self.n, self.D = Xa.shape
        D = self.D
        self.nt = D * (D + 1) // 2
        self.y = np.asarray(y, dtype=np.float64)
        dense_rows = not sparse.issparse(Xa) or Xa.nnz > 0.5 * self.n * D
        if dense_rows:
            self.X = np.ascontiguousarray(Xa.toarray() if sparse.issparse(Xa) else Xa,
                                          dtype=np.float64)
            self.Xy = self.X * self.y[:, None]
        else:
            self.X = _csr(Xa)
            self.Xy = (sparse.diags(self.y) @ self.X).tocsr()
        self.s = np.asarray(self.X.T @ self.y).ravel()
        r = np.diff(self.X.indptr) if not dense_rows else np.full(self.n, D)
        iu = np.triu_indices(D)
        self.iu = iu
        self.flat_upper = iu[0] * D + iu[1]
        self.flat_lower = iu[1] * D + iu[0]
        self.Z = None
        if int(np.sum(r * (r + 1) // 2)) <= PAIR_BUDGET:
            Xc = _csr(self.X)
            self.Z = sparse.hstack([packed_outer_rows(Xc, D), _csr(self.Xy)], format="csr")
            self.ZT = None
        self.full = self.rows_sum(np.arange(self.n), None)

    def rows_sum(self, rows: np.ndarray, signs: np.ndarray | None) -> np.ndarray:
        """sum_i sign_i [upper(x_i x_i^T), y_i x_i] over the given rows (signs None = all +1)."""
        w = np.ones(rows.size) if signs is None else signs
        if self.Z is not None:
            # gather the rows' stored values by hand (scipy's row indexing costs more than the
            # arithmetic for the few hundred rows of a typical edit)
            ip = self.Z.indptr
            starts = ip[rows]
            cnt = ip[rows + 1] - starts
            off = np.repeat(starts - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
            return np.bincount(self.Z.indices[off], weights=self.Z.data[off] * np.repeat(w, cnt),
                               minlength=self.Z.shape[1])
        R = self.X[rows]
        G = R.T @ (R * w[:, None])
        return np.concatenate([G[self.iu], R.T @ (w * self.y[rows])])

    def gram(self, P: np.ndarray) -> np.ndarray:
        """Packed rows (B, nt + D) -> symmetric X_A^T X_A (B, D, D)."""
        B, D = P.shape[0], self.D
        G = np.empty((B, D * D))
        G[:, self.flat_lower] = P[:, :self.nt]
        G[:, self.flat_upper] = P[:, :self.nt]
        return G.reshape(B, D, D)


class StackSpace:
    """The *space* of ``_msvmav_core.iterate`` for a stack of linear settings on shared data:
    coef (L, D) the live settings' weight vectors, f never formed (``margins_of`` is None), the
    identity metric, the shift s = X^T y. ``summary`` takes every live setting's margins from
    one product diag(y) X W^T and edits its packed sums P_b; ``prox_step`` solves the live
    settings' systems in one batched LAPACK call; ``keep(rows)`` drops the settings that
    stopped. A stack's summaries give no semi-variance (None: it would cost more passes over the
    n x L margins, and nothing reads it)."""

    def __init__(self, data: _Data, betas: np.ndarray) -> None:
        self.data, self.dim = data, data.D
        self.shift = data.s
        self.shift_f = 0.0  # f is never formed
        self.c = data.n * betas  # per live setting
        self.P: np.ndarray | None = None  # (L, nt + D) packed [upper(G_A), X_A^T y_A]
        # recent (active set, packed sums) pairs per live setting: the sets often oscillate,
        # so an older state can be much closer to the new one than the last
        self.history: list[list] = []

    def initial(self) -> np.ndarray:
        nrm = float(np.sqrt(self.shift @ self.shift))
        if not nrm > 0:
            raise undefined_direction()
        return np.tile(self.shift / nrm, (self.c.size, 1))

    def margins_of(self, coef: np.ndarray) -> None:
        return None

    def signed_sum(self, coef: np.ndarray, f: None) -> np.ndarray:
        """y^T X w' = s . w', one per setting."""
        return coef @ self.shift

    def norm(self, coef: np.ndarray, f: None) -> np.ndarray:
        """||w_b|| as a column (L, 1)."""
        return np.sqrt(np.einsum("bi,bi->b", coef, coef))[:, None]

    def distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        diff = a - b
        return np.sqrt(np.einsum("bi,bi->b", diff, diff)) / math.sqrt(self.dim)

    def keep(self, rows: np.ndarray) -> None:
        """Keep the live settings where ``rows`` (a mask over them) is True."""
        if not rows.all():
            self.c, self.P = self.c[rows], self.P[rows]
            self.history = [h for h, kept in zip(self.history, rows, strict=True) if kept]

    def summary(self, coef: np.ndarray, f: None) -> tuple[np.ndarray, np.ndarray, None]:
        """(theta (L,), the masks of A (L, n), None), the packed sums P moved to the new A."""
        data = self.data
        if self.P is None:  # the start is the same for every setting: its A once
            m0 = np.asarray(data.Xy @ coef[0]).ravel() if coef.size else np.zeros(data.n)
            theta0 = float(m0.mean())
            mask0 = m0 < theta0
            L = coef.shape[0]
            self.P = np.tile(data.rows_sum(np.flatnonzero(mask0), None), (L, 1))
            self.history = [[(mask0, self.P[0].copy())] for _ in range(L)]
            return np.full(L, theta0), np.tile(mask0, (L, 1)), None
        M = np.asarray(data.Xy @ coef.T)  # n x L: every live setting's margins, one pass
        thetas = M.mean(axis=0)
        masks = np.ascontiguousarray((thetas[None, :] > M).T)  # L x n
        for j, new in enumerate(masks):
            self.P[j] = _move_active(data, self.history[j], new)
        # the semi-variances, for the "objective" stopping rule
        sv = np.square(np.maximum(thetas[None, :] - M, 0.0)).mean(axis=0)
        return thetas, masks, sv

    def prox_step(self, coef: np.ndarray, f: None, mask: np.ndarray, thetas: np.ndarray
                  ) -> tuple[np.ndarray, None]:
        """w' = w + delta, (n beta I + G_A) delta = theta s_A - G_A w, for every setting whose
        A is not empty (the others keep w)."""
        nt, diag = self.data.nt, np.arange(self.dim)
        CP = coef.copy()
        nonempty = mask.any(axis=1)
        if nonempty.any():
            P = self.P[nonempty]
            G = self.data.gram(P)
            rhs = thetas[nonempty, None] * P[:, nt:] - np.einsum("bij,bj->bi", G, coef[nonempty])
            G[:, diag, diag] += self.c[nonempty, None]
            CP[nonempty] += np.linalg.solve(G, rhs[:, :, None])[:, :, 0]
        return CP, None


def fit_linear_batch(X, y: np.ndarray, alphas, betas, *, max_iter: int = 100,
                     tol: float = 1e-8, fit_intercept: bool = True, stop: str = "step",
                     callback: Callable[[int], object] | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Linear MSVMAv for every pair (alphas[b], betas[b]) on the same (X, y in {-1, +1}).

    Returns (W, n_iter): W (B, D) holds the augmented weight vectors (bias last when
    ``fit_intercept``), n_iter (B,) the iterations each setting ran. ``callback(k)`` is called
    after each lockstep iteration k; an exception it raises propagates (aborts).
    """
    data = _Data(X, y, fit_intercept)
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    betas = np.asarray(betas, dtype=np.float64).ravel()

    def each(record: dict) -> None:  # its return value is not a stop request
        if callback is not None:
            callback(record["iteration"])

    W, n_iter, _, _ = iterate(StackSpace(data, betas), data.y, alpha=alphas[:, None],
                              max_iter=max_iter, tol=tol, callback=each, stop=stop)
    return W, n_iter


def _move_active(data: _Data, history: list, new: np.ndarray) -> np.ndarray:
    """Packed sums for the active set ``new``, edited from the cheapest start: one of the
    recent states in ``history`` (by the rows that differ), a rebuild from A, or the full sums
    minus the complement of A. Appends the new state to ``history`` (bounded)."""
    size = int(np.count_nonzero(new))
    rest = data.n - size
    best, best_cost, best_diff = None, min(size, rest), None
    for h in range(len(history) - 1, -1, -1):
        diff = history[h][0] != new
        cost = int(np.count_nonzero(diff))
        if cost < best_cost:
            best, best_cost, best_diff = h, cost, diff
            if cost == 0:
                break
    if best is not None:
        out = history[best][1].copy()
        rows = np.flatnonzero(best_diff)
        if rows.size:
            out += data.rows_sum(rows, np.where(new[rows], 1.0, -1.0))
    elif size <= rest:
        out = data.rows_sum(np.flatnonzero(new), None)
    else:
        out = data.full - data.rows_sum(np.flatnonzero(~new), None)
    history.append((new, out))
    if len(history) > HISTORY:
        del history[0]
    return out
