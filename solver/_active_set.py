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


class PrimalSystem:
    """(diag(base) + X_A^T X_A)^{-1}: base = c for linear MSVMAv, c (1 + sigma^2) for the
    low-rank (Nystroem) kernel path in its rotated coordinates."""

    def __init__(self, Xa, base: np.ndarray, *, update: str = "woodbury") -> None:
        self.Xa, self.base, self.update = Xa, base, update
        n, D = Xa.shape
        self.D = D
        self.mask = np.zeros(n, dtype=bool)
        self.G = np.zeros((D, D))
        self.M = np.diag(1.0 / base)
        self.n_refactor = 0
        self.n_updates = 0

    def _refactor(self) -> None:
        self.G = _gram(self.Xa[self.mask])
        H = self.G.copy()
        H[np.diag_indices_from(H)] += self.base
        self.M = spd_inverse(H, overwrite=True)
        self.n_refactor += 1

    def set_active(self, mask: np.ndarray) -> None:
        add = np.flatnonzero(mask & ~self.mask)
        rem = np.flatnonzero(self.mask & ~mask)
        p = add.size + rem.size
        self.mask = mask.copy()
        if self.update == "direct":
            self._refactor()
            return
        if p == 0:
            return
        if p > REFACTOR_SHARE * self.D:
            self._refactor()
            return
        rows = self.Xa[np.concatenate([add, rem])]
        U = rows.toarray().T if sparse.issparse(rows) else rows.T  # D x p
        sign = np.concatenate([np.ones(add.size), -np.ones(rem.size)])
        self.G += (U * sign) @ U.T
        MU = self.M @ U
        inner = U.T @ MU
        inner[np.diag_indices_from(inner)] += sign  # S^{-1} = S for S = diag(+-1)
        self.M -= MU @ linalg.solve(inner, MU.T, assume_a="sym")
        self.M = 0.5 * (self.M + self.M.T)
        self.n_updates += 1

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
        x = x + self.M @ r
        if np.linalg.norm(self._residual(rhs, x)) <= RESIDUAL_TOL * scale:
            return x
        self._refactor()
        return self.M @ rhs


class DualSystem:
    """(c I + P_AA)^{-1} for the exact kernel semi-variance step, P = K - I + B^{-1}."""

    def __init__(self, K: np.ndarray, Binv: np.ndarray, c: float) -> None:
        self.K, self.Binv, self.c = K, Binv, c
        self.idx = np.zeros(0, dtype=np.intp)  # members of A in the order of Sinv's rows
        self.Sinv = np.zeros((0, 0))
        self.n_refactor = 0
        self.n_updates = 0

    def _p_block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        ix = np.ix_(rows, cols)
        return self.K[ix] + self.Binv[ix]

    def _s_block(self, idx: np.ndarray) -> np.ndarray:
        S = self._p_block(idx, idx)
        S[np.diag_indices_from(S)] += self.c - 1.0
        return S

    def _refactor(self, idx: np.ndarray) -> None:
        self.idx = idx
        empty = np.zeros((0, 0))
        self.Sinv = spd_inverse(self._s_block(idx), overwrite=True) if idx.size else empty
        self.n_refactor += 1

    def set_active(self, mask: np.ndarray) -> None:
        member = np.zeros(mask.size, dtype=bool)
        member[self.idx] = True
        keep_pos = np.flatnonzero(mask[self.idx])
        drop_pos = np.flatnonzero(~mask[self.idx])
        new = np.flatnonzero(mask & ~member)
        if drop_pos.size == 0 and new.size == 0:
            return
        if drop_pos.size + new.size > REFACTOR_SHARE * max(self.idx.size, 1) or keep_pos.size == 0:
            self._refactor(np.flatnonzero(mask))
            return
        Sinv = self.Sinv
        if drop_pos.size:
            # Schur-complement deletion: (S_kk)^{-1} = Sinv_kk - Sinv_kd Sinv_dd^{-1} Sinv_dk
            Skd = Sinv[np.ix_(keep_pos, drop_pos)]
            Sdd = Sinv[np.ix_(drop_pos, drop_pos)]
            Sinv = Sinv[np.ix_(keep_pos, keep_pos)] - Skd @ linalg.solve(Sdd, Skd.T,
                                                                          assume_a="sym")
        idx = self.idx[keep_pos]
        if new.size:
            # bordering: S' = [[S, B], [B^T, C]], Schur T = C - B^T S^{-1} B
            B = self._p_block(idx, new)
            C = self._s_block(new)
            SB = Sinv @ B
            Tinv = np.linalg.inv(C - B.T @ SB)
            Tinv = 0.5 * (Tinv + Tinv.T)
            SBT = SB @ Tinv
            top = np.hstack([Sinv + SBT @ SB.T, -SBT])
            bottom = np.hstack([-SBT.T, Tinv])
            Sinv = np.vstack([top, bottom])
            idx = np.concatenate([idx, new])
        self.idx = idx
        self.Sinv = 0.5 * (Sinv + Sinv.T)
        self.n_updates += 1

    def apply(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta = B^{-1} K_{:,A} z and K delta = P_{:,A} z for z indexed like ``self.idx``."""
        zfull = np.zeros(self.K.shape[0])
        zfull[self.idx] = z
        delta = zfull - self.Binv @ zfull
        Kdelta = self.K @ zfull - delta
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
