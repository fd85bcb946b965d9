"""MSVMAv's spaces with row weights v_i > 0 (docs/algorithm.md, "Weights"), for
``_msvmav_core.iterate``, which runs them unchanged.

With W = sum v, the weighted average margin theta = (1/W) sum v_i m_i, the active set
A = {i : m_i < theta}, the weighted semi-variance SV = (1/W) sum v_i (theta - m_i)_+^2, the
weighted class sum s_v = X^T V y and c = W beta:

* linear (and the low-rank kernel's rotated coordinates): the step solves
  (c I + X_A^T V_A X_A) delta = X_A^T V_A e_A, which is the unweighted step on the rows
  sqrt(v_i) x_i with targets sqrt(v_i) y_i (its e is then sqrt(v) e): any of
  ``_linear_step``'s solvers, given those rows;
* exact kernel: (c B + K_{:,A} V_A K_{A,:}) delta = K_{:,A} V_A e_A reduces, as the
  unweighted one does, to (c V_A^{-1} + P_AA) z = e_A with delta = B^{-1} K_{:,A} z: the same
  ``DualSystem`` with a diagonal c / v_i in place of c.

``iterate`` divides the shift by 2 alpha n; the spaces hand it s_v n / W, so that the
average-margin step adds s_v / (2 alpha W). Rows of weight 0 are removed before a space is
made (they take no part in any sum).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from ._active_set import DualSystem
from ._linear_step import make_linear_step
from ._msvmav_core import DualSpace, undefined_direction
from ._row_blocks import RowBlocks


def weighted_summary(y: np.ndarray, f: np.ndarray, v: np.ndarray, total: float
                     ) -> tuple[float, np.ndarray, float]:
    """(theta, the mask of A = {i : m_i < theta}, SV) of the margins m = y f under weights v
    summing to ``total``."""
    m = y * f
    theta = float(v @ m) / total
    mask = m < theta
    short = np.where(mask, theta - m, 0.0)
    return theta, mask, float(v @ (short * short)) / total


def scaled_rows(X, root: np.ndarray):
    """diag(root) X (CSR stays CSR)."""
    if sparse.issparse(X):
        return sparse.csr_matrix(sparse.diags(root) @ X)
    return X * root[:, None]


class WeightedPrimalSpace:
    """coef in R^D, f = X coef, ||coef||_mu = sqrt(sum mu coef^2), under row weights v > 0.

    ``shift`` is the weighted shift (linear: s_v = X^T V y; low-rank: U^T V y); ``base_extra``
    and ``mu`` as ``PrimalSpace``'s (the low-rank path's metric)."""

    def __init__(self, X, y: np.ndarray, v: np.ndarray, beta: float, *, shift: np.ndarray,
                 base_extra: np.ndarray | None = None, mu: np.ndarray | None = None,
                 update: str = "incremental", solver: str = "dense", threads: int = 1) -> None:
        n, D = X.shape
        self.total = float(v.sum())
        c = self.total * beta
        base = np.full(D, c) if base_extra is None else c * (1.0 + base_extra)
        self.y, self.v, self.dim = y, v, D
        self.root = np.sqrt(v)
        self.mu = np.ones(D) if mu is None else mu
        self.sqrt_mu = np.sqrt(self.mu)
        self.rows = RowBlocks(X, threads)
        self.shift = shift * (n / self.total)
        self.shift_f = self.rows.matvec(self.shift)
        Xs = scaled_rows(X, self.root)
        self.system = make_linear_step(solver, Xs, self.root * y, base,
                                       rows=RowBlocks(Xs, threads), update=update)

    def counters(self) -> dict[str, int]:
        return self.system.counters

    def norm(self, coef: np.ndarray, f: np.ndarray) -> float:
        return float(np.sqrt(coef @ (self.mu * coef)))

    def initial(self) -> np.ndarray:
        nrm = self.norm(self.shift, self.shift_f)
        if not nrm > 0:
            raise undefined_direction()
        return self.shift / nrm

    def decision(self, coef: np.ndarray) -> np.ndarray:
        return self.rows.matvec(coef)

    margins_of = decision
    combines_f = False  # Anderson: the extrapolation's f from X (``_acceleration``)

    def signed_sum(self, coef: np.ndarray, f: np.ndarray) -> float:
        """(Vy) . f, the sign of the weighted average margin."""
        return float((self.v * self.y) @ f)

    def summary(self, coef: np.ndarray, f: np.ndarray) -> tuple[float, np.ndarray, float]:
        return weighted_summary(self.y, f, self.v, self.total)

    def prox_step(self, coef, f, mask, theta):
        self.system.set_active(mask)
        if not mask.any():
            return coef.copy(), f.copy()
        new = coef + self.system.step(coef, theta, self.root * f)
        return new, self.decision(new)

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.linalg.norm(self.sqrt_mu * (a - b)) / math.sqrt(self.dim))

    def inner(self, U: np.ndarray, FU, V: np.ndarray, FV) -> np.ndarray:
        """Inner products in the norm's metric diag(mu) (``_acceleration.Anderson``'s)."""
        return U @ (self.mu * V).T


class WeightedDualSpace(DualSpace):
    """Exact kernel under row weights v > 0: coef = a, f = K a; the (I + K)^{-1} of ``pair``
    shared by every one-vs-rest task, the active system's diagonal c / v_i."""

    def __init__(self, pair: tuple[np.ndarray, np.ndarray], y: np.ndarray, v: np.ndarray,
                 beta: float) -> None:
        K = pair[0]
        n = K.shape[0]
        self.total = float(v.sum())
        self.K, self.y, self.v, self.dim = K, y, v, n
        self.shift = (v * y) * (n / self.total)
        self.shift_f = K @ self.shift
        self.system = DualSystem(pair, self.total * beta / v)
        self.steps = 0

    def signed_sum(self, coef: np.ndarray, f: np.ndarray) -> float:
        return float((self.v * self.y) @ f)

    def summary(self, coef: np.ndarray, f: np.ndarray) -> tuple[float, np.ndarray, float]:
        return weighted_summary(self.y, f, self.v, self.total)


__all__ = ["WeightedDualSpace", "WeightedPrimalSpace", "scaled_rows",
           "weighted_summary"]
