"""Adaptive low-rank kernel factors: K ~ L L^T with a stated relative trace error.

``pivoted_cholesky`` is randomly pivoted Cholesky in blocks with rejection (Chen, Epperly, Tropp
and Webber, "Randomly pivoted Cholesky", 2023; Epperly, Tropp and Webber, "Embrace rejection",
2024): pivots are sampled with probability proportional to the diagonal of the residual
K - L L^T, a block of candidates at a time so that the kernel columns and the residual update are
matrix-matrix products; inside the block each candidate is accepted with probability (its
current residual) / (its residual when the block was drawn), which keeps the one-at-a-time
sampling law and rejects near-duplicates. Pivots are added until

    trace(K - L L^T) <= tol * trace(K)

(the *relative trace error*, which for a PSD residual bounds its nuclear norm and so its
spectral norm), or until ``max_rank`` pivots, whichever comes first; the achieved error is
reported either way.

The factor is the Nystroem approximation on the pivot rows: L = K(X, X_P) L_PP^{-T} with
L_PP = L[P] lower triangular (in pivot order), so a new row x has the feature
phi(x) = L_PP^{-1} k(X_P, x) and K(x, z) ~ phi(x)^T phi(z).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .kernels import kernel_diagonal, kernel_matrix

# Candidates drawn per block: small blocks waste little past the needed rank, large ones make
# better use of BLAS-3. The block grows with the rank found so far.
MIN_BLOCK = 32
MAX_BLOCK = 512
# A pivot whose residual is below this share of the largest kernel diagonal is never accepted
# (it would make L_PP ill-conditioned and adds nothing to the approximation).
PIVOT_FLOOR = 1e-12


@dataclass
class LowRankFactor:
    """K(X, X) ~ L L^T. ``factor`` is L^T, shape (rank, n) (each column of L contiguous);
    ``pivots`` the training rows chosen, in order; ``error`` the relative trace error
    trace(K - L L^T) / trace(K) achieved."""

    factor: np.ndarray
    pivots: np.ndarray
    error: float

    @property
    def rank(self) -> int:
        return int(self.pivots.size)

    def pivot_block(self) -> np.ndarray:
        """L_PP (rank x rank), lower triangular."""
        return np.ascontiguousarray(self.factor[:, self.pivots].T)


@dataclass(frozen=True)
class PivotStep:
    """What a block of pivots did, given to ``pivoted_cholesky``'s ``stop`` callback: the rank
    and relative trace error after it, and ``gain``, the largest trace reduction one of its
    pivots made. A pivot j reduces the trace by ||E e_j||^2 / E_jj for the residual E before it
    (a Rayleigh quotient of E), so ``gain`` is a lower estimate of E's largest eigenvalue."""

    rank: int
    error: float
    gain: float


def _accept(B: np.ndarray, drawn: np.ndarray, u: np.ndarray, floor: float) -> list[int]:
    """The candidates accepted in order, each with probability (current residual) /
    (residual when drawn), updating the candidates' b x b residual block ``B`` (a copy)
    after each acceptance."""
    B = 0.5 * (B + B.T)
    accepted: list[int] = []
    for j in range(B.shape[0]):
        pj = B[j, j]
        if pj <= floor or u[j] * drawn[j] > pj:
            continue
        accepted.append(j)
        col = B[:, j] / np.sqrt(pj)
        B -= np.outer(col, col)
    return accepted


def _new_columns(C: np.ndarray, cand: np.ndarray, acc: np.ndarray) -> np.ndarray | None:
    """The factor's new rows for the accepted candidates (None when rounding stops the
    Cholesky factorisation of their block)."""
    S = C[np.ix_(acc, cand[acc])]
    S = 0.5 * (S + S.T)
    try:
        F = linalg.cholesky(S, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return None
    return linalg.solve_triangular(F, C[acc], lower=True, check_finite=False)


def pivoted_cholesky(X, *, kernel: str, gamma: float, degree: int = 3, coef0: float = 1.0,
                     tol: float = 1e-3, max_rank: int | None = None,
                     random_state: np.random.Generator | int | None = None,
                     stop: Callable[[PivotStep], bool] | None = None) -> LowRankFactor:
    """Low-rank factor of K(X, X) meeting ``tol`` (relative trace error) or ``max_rank``.

    X: (n, d) dense or CSR rows; the kernel as ``solver.kernels.kernel_matrix`` defines it
    (not "precomputed"). Cost O(n r (d + r)) time and n r floats for rank r; the n x n kernel
    matrix is never formed. ``stop``, called after each block of pivots with its
    ``PivotStep``, ends the factorisation early when it returns True (the error reached is
    reported as usual)."""
    args = {"kernel": kernel, "gamma": gamma, "degree": degree, "coef0": coef0}
    n = X.shape[0]
    max_rank = n if max_rank is None else max(0, min(int(max_rank), n))
    rng = np.random.default_rng(random_state)
    resid = np.array(kernel_diagonal(X, **args), dtype=np.float64)
    total = float(resid.sum())
    floor = PIVOT_FLOOR * float(resid.max()) if n else 0.0
    target = tol * total
    Lt = np.empty((max_rank, n))
    pivots: list[int] = []
    r = 0
    remaining = total
    empty = 0
    while r < max_rank and remaining > target and remaining > 0:
        block = int(min(max_rank - r, MAX_BLOCK, max(MIN_BLOCK, r // 2)))
        p = np.clip(resid, 0.0, None)
        cand = np.unique(rng.choice(n, size=block, replace=True, p=p / p.sum()))
        cand = rng.permutation(cand)  # the acceptance order: random, like the draws
        drawn = resid[cand].copy()
        # residual columns of the candidates, (b, n): K(X_B, X) - L_B L^T
        C = kernel_matrix(X[cand], X, **args)
        if r:
            C -= Lt[:r, cand].T @ Lt[:r]
        accepted = _accept(C[:, cand], drawn, rng.random(cand.size), floor)
        if not accepted:
            # nothing accepted: the residual is at the floor where it was drawn (the first
            # draw of a block is always accepted above it); a few such blocks in a row mean
            # the numerical rank is reached
            empty += 1
            if empty >= 3 or float(resid.max()) <= floor:
                break
            continue
        empty = 0
        acc = np.asarray(accepted)
        new = _new_columns(C, cand, acc)  # (s, n)
        if new is None:  # rounding: keep the prefix that factors
            break
        gains = np.einsum("ij,ij->i", new, new)
        # keep only the prefix of the new columns needed to meet the target
        need = np.flatnonzero(remaining - np.cumsum(gains) <= target)
        s = int(need[0]) + 1 if need.size else acc.size
        s = min(s, max_rank - r)
        Lt[r:r + s] = new[:s]
        resid -= np.einsum("ij,ij->j", new[:s], new[:s])
        np.maximum(resid, 0.0, out=resid)
        pivots.extend(cand[acc[:s]].tolist())
        r += s
        remaining = float(resid.sum())
        if stop is not None and stop(PivotStep(r, remaining / total, float(gains[:s].max()))):
            break
    factor = Lt[:r].copy() if r < max_rank else Lt
    error = remaining / total if total > 0 else 0.0
    return LowRankFactor(factor, np.asarray(pivots, dtype=np.intp), float(error))



def landmark_features(X, landmarks: np.ndarray, pivot_block: np.ndarray, *, kernel: str,
                      gamma: float, degree: int = 3, coef0: float = 1.0) -> np.ndarray:
    """phi(x) = L_PP^{-1} k(X_P, x) for each row of X: the factor's L^T, (rank, len(X)).

    ``landmarks`` X_P are the pivot rows (``X[factor.pivots]``) and ``pivot_block`` L_PP their
    lower-triangular block (``LowRankFactor.pivot_block``): for the rows a factor was computed
    on this is its ``factor`` up to rounding; for other rows it is the same Nystroem map, so
    that a factor chosen on a sample of the rows extends to every row (the cluster fit,
    ``solver.distributed``, maps each partition with it)."""
    K = kernel_matrix(landmarks, X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
    return linalg.solve_triangular(pivot_block, K, lower=True, check_finite=False)
