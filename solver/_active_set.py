"""The active-set linear systems of MSVMAv's semi-variance step, kept current across iterations.

Linear (msvmav.md 1.2-1.4): the step is w' = w + delta with
    (c I + X_A^T X_A) delta = X_A^T e_A,   c = n beta,   e_i = theta y_i - f_i  (i in A).
``PrimalSystem`` keeps G = X_A^T X_A and M = (c I + G)^{-1} (D x D; c I generalised to a
diagonal for the low-rank kernel path) and applies the rows that
enter or leave A as one mixed-sign Woodbury update (BLAS-3), refactoring from scratch when the
change is large or the residual check fails.

Kernel (msvmav.md 1.5): with B = I + K and P = K B^{-1} K = K - I + B^{-1}, Woodbury turns the
n x n system of the paper into one of size |A|:
    (c I + P_AA) z = e_A,   delta = B^{-1} K_{:,A} z = z - B^{-1} z,   K delta = P z = K z - delta.
``DualSystem`` keeps S_A^{-1} = (c I + P_AA)^{-1} and edits it by bordering (rows entering A) and
Schur-complement deletion (rows leaving A), again refactoring when needed.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, sparse

from ._linalg import spd_inverse

# A solve is accepted when ||residual|| <= RESIDUAL_TOL * ||rhs||; otherwise one refinement
# step, and a refactorisation if that is not enough.
RESIDUAL_TOL = 1e-11
# Refactor instead of updating when more than this share of the dimension changes at once.
REFACTOR_SHARE = 0.25


def _gram(rows) -> np.ndarray:
    g = rows.T @ rows
    return g.toarray() if sparse.issparse(g) else np.asarray(g)


def _dense_rows(X, idx: np.ndarray) -> np.ndarray:
    """X[idx] as a dense (len(idx), d) array; for CSR without scipy's per-call overhead
    (this runs every iteration with a handful of rows)."""
    if not sparse.issparse(X):
        return X[idx]
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
    X_A^T e_A = theta s_A - G w costs O(D^2) instead of a pass over the data."""

    def __init__(self, Xa, y: np.ndarray, base: np.ndarray, *, update: str = "woodbury") -> None:
        self.Xa, self.y, self.base, self.update = Xa, y, base, update
        n, D = Xa.shape
        self.D = D
        self.mask = np.zeros(n, dtype=bool)
        self.G = np.zeros((D, D))
        self.sA = np.zeros(D)
        self.M = np.diag(1.0 / base)
        self.n_refactor = 0
        self.n_updates = 0

    def _invert(self) -> None:
        H = self.G.copy()
        H[np.diag_indices_from(H)] += self.base
        self.M = spd_inverse(H, overwrite=True)
        self.n_refactor += 1

    def _rebuild(self) -> None:
        """G and s_A from scratch, then invert: the reference path, and the cure for drift."""
        rows = self.Xa[self.mask]
        self.G = _gram(rows)
        self.sA = np.asarray(rows.T @ self.y[self.mask]).ravel()
        self._invert()

    def set_active(self, mask: np.ndarray) -> None:
        add = np.flatnonzero(mask & ~self.mask)
        rem = np.flatnonzero(self.mask & ~mask)
        p = add.size + rem.size
        self.mask = mask.copy()
        if self.update == "direct":
            self._rebuild()
            return
        if p == 0:
            return
        changed = np.concatenate([add, rem])
        sign = np.concatenate([np.ones(add.size), -np.ones(rem.size)])
        signed_y = sign * self.y[changed]
        if p > REFACTOR_SHARE * self.D:
            rows = self.Xa[changed]
            # G and s_A change by the rows that entered minus the rows that left (exact sums)
            self.sA += np.asarray(rows.T @ signed_y).ravel()
            if sparse.issparse(rows):
                signed = rows.copy()
                signed.data *= np.repeat(sign, np.diff(rows.indptr))
                self.G += (rows.T @ signed).toarray()
            else:
                self.G += rows.T @ (rows * sign[:, None])
            self._invert()
            return
        U = _dense_rows(self.Xa, changed).T  # D x p
        self.sA += U @ signed_y
        self.G += (U * sign) @ U.T
        # mixed-sign Woodbury: M <- M - M U (S + U^T M U)^{-1} U^T M, S = diag(+-1) = S^{-1}
        MU = self.M @ U
        inner = U.T @ MU
        inner[np.diag_indices_from(inner)] += sign
        self.M -= MU @ linalg.solve(inner, MU.T, assume_a="sym")
        self.M = 0.5 * (self.M + self.M.T)
        self.n_updates += 1

    def step(self, w: np.ndarray, theta: float) -> np.ndarray:
        """delta solving (diag(base) + G) delta = X_A^T (theta y_A - X_A w) = theta s_A - G w."""
        return self.solve(theta * self.sA - self.G @ w)

    def _residual(self, rhs: np.ndarray, x: np.ndarray) -> np.ndarray:
        return rhs - (self.base * x + self.G @ x)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        x = self.M @ rhs
        if self.update == "direct":
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


class DualSystem:
    """(c I + P_AA)^{-1} for the exact kernel semi-variance step, P = K - I + B^{-1}."""

    @staticmethod
    def pair(K: np.ndarray) -> np.ndarray:
        """[K | (I + K)^{-1}] as one n x 2n array; K is released (peak about 3 n x n arrays)."""
        n = K.shape[0]
        KB = np.empty((n, 2 * n))
        KB[:, :n] = K
        K[np.diag_indices_from(K)] += 1.0
        KB[:, n:] = spd_inverse(K, overwrite=True)
        return KB

    def __init__(self, KB: np.ndarray, c: float) -> None:
        # KB = [K | B^{-1}] side by side (n x 2n). The rows of A are kept packed in R (in the
        # order of idx), so each step is one contiguous |A| x 2n product, with no gather.
        n = KB.shape[0]
        self.KB, self.K, self.Binv, self.c = KB, KB[:, :n], KB[:, n:], c
        self.idx = np.zeros(0, dtype=np.intp)  # members of A in the order of Sinv's rows
        self.R = np.empty((0, 2 * n))
        self.Sbuf = np.zeros((0, 0))  # (c I + P_AA)^{-1} in its leading |A| x |A| block
        self.scratch = np.empty(0)  # reused for the |A| x |A| low-rank product
        self.n_refactor = 0
        self.n_updates = 0

    def _store_rows(self, start: int, new: np.ndarray) -> None:
        end = start + new.size
        if end > self.R.shape[0]:
            grown = np.empty((min(self.KB.shape[0], max(end, int(1.5 * end) + 16)),
                              self.KB.shape[1]))
            grown[:start] = self.R[:start]
            self.R = grown
        np.take(self.KB, new, axis=0, out=self.R[start:end])

    def _p_rows(self, m: int, cols: np.ndarray) -> np.ndarray:
        """P[idx[:m], cols] from the packed rows (P = K + B^{-1} - I; cols are not in idx)."""
        n = self.KB.shape[0]
        return self.R[:m, cols] + self.R[:m, n + cols]

    def _s_block(self, idx: np.ndarray) -> np.ndarray:
        ix = np.ix_(idx, idx)
        S = self.K[ix] + self.Binv[ix]
        S[np.diag_indices_from(S)] += self.c - 1.0
        return S

    def _refactor(self, idx: np.ndarray) -> None:
        self.idx = idx
        self._store_rows(0, idx)
        self.Sbuf = spd_inverse(self._s_block(idx), overwrite=True) if idx.size else np.zeros(
            (0, 0))
        self.n_refactor += 1

    def set_active(self, mask: np.ndarray) -> None:
        m = self.idx.size
        member = np.zeros(mask.size, dtype=bool)
        member[self.idx] = True
        keep = mask[self.idx]
        drop_pos = np.flatnonzero(~keep)
        new = np.flatnonzero(mask & ~member)
        if drop_pos.size == 0 and new.size == 0:
            return
        if drop_pos.size + new.size > REFACTOR_SHARE * max(m, 1) or drop_pos.size == m:
            self._refactor(np.flatnonzero(mask))
            return
        self._replace(drop_pos, keep, new)
        self.n_updates += 1

    def _replace(self, drop_pos: np.ndarray, keep: np.ndarray, new: np.ndarray) -> None:
        """Remove the slots ``drop_pos`` and append the indices ``new`` with one pass over S^{-1}.

        Deletion (Schur complement): S'_kk^{-1} = S_kk^{-1} - S_kd S_dd^{-1} S_dk (S = the kept
        inverse from here on). Bordering by B = P[kept, new], C = P[new, new] + (c - 1) I:
        with SB = S' B and T = C - B^T SB, the kept block gains SB T^{-1} SB^T, the new
        off-diagonal block is -SB T^{-1} and the new diagonal block T^{-1}. Both changes of the
        kept block are applied as one rank-(|d| + |new|) product, in the old slot layout; then
        kept rows at the tail move into the holes of dropped ones and the new rows are appended.
        """
        m = self.idx.size
        S = self.Sbuf
        left: list[np.ndarray] = []
        right: list[np.ndarray] = []
        if drop_pos.size:
            Sd = S[:m, drop_pos]
            X = linalg.solve(Sd[drop_pos], Sd.T, assume_a="sym")  # S_dd^{-1} S_d.
            left.append(-Sd)
            right.append(X.T)
        if new.size:
            B = self._p_rows(m, new)
            B[drop_pos] = 0.0  # dropped slots no longer couple
            SB = S[:m, :m] @ B
            if drop_pos.size:
                SB -= Sd @ (X @ B)
            kept_rows = np.flatnonzero(keep)
            T = self._s_block(new) - B[kept_rows].T @ SB[kept_rows]
            Tinv = np.linalg.inv(T)
            Tinv = 0.5 * (Tinv + Tinv.T)
            SBT = SB @ Tinv
            left.append(SBT)
            right.append(SB)
        W, Z = np.hstack(left), np.hstack(right)
        if self.scratch.size < m * m:
            self.scratch = np.empty(int(1.25 * m * m) + 256)
        update = np.matmul(W, Z.T, out=self.scratch[: m * m].reshape(m, m))
        S[:m, :m] += update
        m_new = m - drop_pos.size
        perm = np.arange(m_new)  # new slot -> old slot
        if drop_pos.size:
            holes = drop_pos[drop_pos < m_new]
            tails = np.flatnonzero(keep[m_new:]) + m_new
            perm[holes] = tails
            S[holes, :m] = S[tails, :m]
            S[:m_new, holes] = S[:m_new, tails]
            self.R[holes] = self.R[tails]
        self.idx = self.idx[perm]
        if new.size:
            m2 = m_new + new.size
            if m2 > S.shape[0]:
                grown = np.empty((int(1.5 * m2) + 16,) * 2)
                grown[:m_new, :m_new] = S[:m_new, :m_new]
                self.Sbuf = S = grown
            SBT = SBT[perm]
            S[:m_new, m_new:m2] = -SBT
            S[m_new:m2, :m_new] = -SBT.T
            S[m_new:m2, m_new:m2] = Tinv
            self._store_rows(m_new, new)
            self.idx = np.concatenate([self.idx, new])

    @property
    def Sinv(self) -> np.ndarray:  # noqa: N802 - the matrix's name in the derivation
        m = self.idx.size
        return self.Sbuf[:m, :m]

    def apply(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta = B^{-1} K_{:,A} z and K delta = P_{:,A} z for z indexed like ``self.idx``.

        K and B^{-1} are symmetric, so their columns in A are read as the packed rows: the step
        costs O(n |A|), not O(n^2)."""
        rows = self.idx
        n = self.KB.shape[0]
        both = z @ self.R[:rows.size]
        delta = -both[n:]
        delta[rows] += z
        Kdelta = both[:n] - delta
        return delta, Kdelta

    def solve(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Solve (c I + P_AA) z = e_A, e of length n; return (delta, K delta)."""
        eA = e[self.idx]
        scale = np.linalg.norm(eA)
        z = self.Sinv @ eA
        delta, Kdelta = self.apply(z)
        r = eA - (self.c * z + Kdelta[self.idx])
        if np.linalg.norm(r) <= RESIDUAL_TOL * scale:
            return delta, Kdelta
        z = z + self.Sinv @ r  # one step of iterative refinement
        delta, Kdelta = self.apply(z)
        r = eA - (self.c * z + Kdelta[self.idx])
        if np.linalg.norm(r) <= RESIDUAL_TOL * scale:
            return delta, Kdelta
        self._refactor(self.idx)
        return self.apply(self.Sinv @ eA)
