"""The exact kernel's active-set system, kept current across iterations (the linear step's
systems are in ``solver._linear_step``; this module also holds the residual and refactoring
thresholds they share).

Kernel (docs/algorithm.md, "Kernels"): with B = I + K and P = K B^{-1} K = K - I + B^{-1},
Woodbury turns the n x n system of the paper into one of size |A|:
    (c I + P_AA) z = e_A,   delta = B^{-1} K_{:,A} z = z - B^{-1} z,   K delta = P z = K z - delta.
``DualSystem`` keeps S_A^{-1} = (c I + P_AA)^{-1} and edits it by bordering (rows entering A) and
Schur-complement deletion (rows leaving A), again refactoring when needed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg import blas

from ._linalg import spd_inverse, spd_inverse_blocked, spd_inverse_checked
from ._row_blocks import THREADPOOLS, fit_threads
from ._symmetric_product import THREADED_MIN_DIM, spare_cores

# A solve is accepted when ||residual|| <= RESIDUAL_TOL * ||rhs||; otherwise one refinement
# step, and a refactorisation if that is not enough.
RESIDUAL_TOL = 1e-11
# Refactor instead of updating when more than this share of the dimension changes at once.
REFACTOR_SHARE = 0.25
# Free slots added to the kernel system's inverse whenever it has to grow (each growth is a copy).
SLACK = 32
# Above this share of n rows in A, the kernel system stops packing the rows of A (memory bound);
# it packs them again below UNPACK_HYSTERESIS times that share.
PACK_SHARE = 0.6
UNPACK_HYSTERESIS = 0.8


def inverse_threads(n: int) -> int:
    """BLAS threads for the inverse of I + K (n x n): the fit's (``fit_threads``) where a
    core is idle when it starts (``_symmetric_product.spare_cores``), else one; one below
    THREADED_MIN_DIM rows. A descheduled partner thread stalls every block of a
    threaded factorisation: on the two-core machine with other processes busy (load average
    13), ``pair`` of magic's 2,000-row RBF kernel took 2.73 s on two threads against 0.62 s
    on one (best of 5, alternating), 5,000 rows 25.1 s against 10.9 s."""
    threads = fit_threads()
    if threads == 1 or n < THREADED_MIN_DIM:
        return 1
    return min(threads, 1 + spare_cores())


class DualSystem:
    """(c I + P_AA)^{-1} for the exact kernel semi-variance step, P = K - I + B^{-1}.

    Members of A live in *slots*: slot s holds index ``slot_idx[s]`` (-1 when free), the
    packed row R[s] = [K[i] | B^{-1}[i]] and row and column s of S = (c I + P_AA)^{-1}. A free
    slot's row and column of S are exactly zero, so it takes no part in any product, and a row
    that leaves A costs no data movement. S is one C-contiguous h x h array (h = slots in use
    or freed), so its low-rank edits are a single in-place BLAS dgemm.
    """

    @staticmethod
    def pair(K: np.ndarray, check: Callable[[int], None] | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """(K, (I + K)^{-1}); K is kept as given, the inverse is a second n x n array.
        With ``check``, the inverse is taken a block of pivots at a time and ``check(done)``
        is called between blocks (``spd_inverse_blocked``: a raised exception stops it).
        On ``inverse_threads`` BLAS threads."""
        Binv = K.copy()
        Binv[np.diag_indices_from(Binv)] += 1.0
        with THREADPOOLS.limit(limits=inverse_threads(K.shape[0]), user_api="blas"):
            if check is not None:
                return K, spd_inverse_blocked(Binv, check=check)
            return K, spd_inverse(Binv, overwrite=True)

    def __init__(self, pair: tuple[np.ndarray, np.ndarray], c: float | np.ndarray) -> None:
        self.K, self.Binv = pair
        self.n = self.K.shape[0]
        self.c = c
        self.slot_idx = np.zeros(0, dtype=np.intp)
        self.R = np.empty((0, 2 * self.n))
        self.packed = False
        self._pack(True)
        self.S = np.zeros((0, 0))
        self.counters = {"inverse_builds": 0, "inverse_updates": 0}

    def _ridge(self, rows: np.ndarray) -> float | np.ndarray:
        """The diagonal c of the rows' system: one number, or (weighted fits,
        ``solver._weighted``) c_i = W beta / v_i given per row as an (n,) array."""
        return self.c if np.ndim(self.c) == 0 else self.c[rows]

    # -- layout -----------------------------------------------------------------------------
    @property
    def used(self) -> np.ndarray:
        return np.flatnonzero(self.slot_idx >= 0)

    @property
    def idx(self) -> np.ndarray:
        """Members of A in slot order."""
        return self.slot_idx[self.slot_idx >= 0]

    def _pack(self, packed: bool) -> None:
        """Keep (or stop keeping) the packed rows R of the members of A.

        R is reserved for n rows; pages of np.empty are only mapped when rows are written, so
        it costs memory in proportion to the slots used and never has to be copied to grow.
        Above PACK_SHARE n members, R is released and each step reads K and (I + K)^{-1}
        whole instead (at most 1 / PACK_SHARE times the reads), so that K, (I + K)^{-1}, R
        and S never exceed about four n x n arrays."""
        if packed == self.packed:
            return
        self.packed = packed
        self.R = np.empty((self.n, 2 * self.n) if packed else (0, 2 * self.n))
        if packed:
            h = self.slot_idx.size
            self.R[:h] = 0.0  # free slots' rows are read (times z = 0): keep them finite
            used = self.used
            self._store_rows(used, self.slot_idx[used])

    def _resize(self, h: int) -> None:
        """Make S h x h (C-contiguous), keeping the common leading block; new slots are free."""
        old = self.S
        k = min(h, old.shape[0])
        S = np.empty((h, h))
        S[:k, :k] = old[:k, :k]
        S[k:, :] = 0.0
        S[:k, k:] = 0.0
        self.S = S
        self.slot_idx = np.concatenate([self.slot_idx[:k], np.full(h - k, -1, dtype=np.intp)])
        if self.packed:
            self.R[k:h] = 0.0  # free slots' rows are read (times z = 0): keep them finite

    def _store_rows(self, slots: np.ndarray, rows: np.ndarray, Kn=None, Bn=None) -> None:
        if self.packed:
            n = self.n
            self.R[slots, :n] = self.K[rows] if Kn is None else Kn
            self.R[slots, n:] = self.Binv[rows] if Bn is None else Bn
        self.slot_idx[slots] = rows

    def _s_block(self, idx: np.ndarray) -> np.ndarray:
        ix = np.ix_(idx, idx)
        S = self.K[ix] + self.Binv[ix]
        S[np.diag_indices_from(S)] += self._ridge(idx) - 1.0
        return S

    def _relayout(self, m: int) -> None:
        """An empty layout for m members in slots 0..m-1, with spare free slots after them."""
        self.slot_idx = np.zeros(0, dtype=np.intp)
        self.S = np.zeros((0, 0))
        self._resize(min(self.n, m + SLACK))  # (clears the rows of the free slots)

    def _refactor(self, idx: np.ndarray) -> None:
        """Invert the block from scratch into a compact layout (slots 0..|A|-1)."""
        m = idx.size
        self._relayout(m)
        if m:
            self._store_rows(np.arange(m), idx)
            self.S[:m, :m] = spd_inverse_checked(self._s_block(idx))
        self.counters["inverse_builds"] += 1

    # -- updates ----------------------------------------------------------------------------
    def set_active(self, mask: np.ndarray) -> None:
        used = self.used
        m = used.size
        held = self.slot_idx[used]
        drop = used[~mask[held]]
        member = np.zeros(mask.size, dtype=bool)
        member[held] = True
        new = np.flatnonzero(mask & ~member)
        if drop.size == 0 and new.size == 0:
            return
        m_new = m - drop.size + new.size
        if m_new > PACK_SHARE * self.n or m_new < UNPACK_HYSTERESIS * PACK_SHARE * self.n:
            self._pack(m_new <= PACK_SHARE * self.n)
        h = self.S.shape[0]
        # flops of the low-rank edit against those of inverting the new block from scratch
        edit = 2.0 * h * h * (drop.size + new.size) + 2.0 * (drop.size**3 + new.size**3)
        if drop.size == m or edit > float(m_new) ** 3:
            self._refactor(np.flatnonzero(mask))
            return
        self._replace(drop, new)
        self.counters["inverse_updates"] += 1
        if self.S.shape[0] - m_new > REFACTOR_SHARE * self.S.shape[0] + SLACK:
            self._compact()

    def _compact(self) -> None:
        """Move the used slots to the front (same matrix, fewer free slots to carry)."""
        used = self.used
        m = used.size
        block = self.S[np.ix_(used, used)]
        packed = self.R[used] if self.packed else None
        rows = self.slot_idx[used]
        self._relayout(m)
        self.S[:m, :m] = block
        if self.packed:
            self.R[:m] = packed
        self.slot_idx[:m] = rows

    def _replace(self, drop: np.ndarray, new: np.ndarray) -> None:
        """Free the slots ``drop`` and give the indices ``new`` slots, in one pass over S.

        Deletion (Schur complement): S'_kk = S_kk - S_kd S_dd^{-1} S_dk. Bordering by
        B = P[kept, new], C = P[new, new] + (c - 1) I: with SB = S' B and T = C - B^T SB, the
        kept block gains SB T^{-1} SB^T, the new off-diagonal block is -SB T^{-1} and the new
        diagonal block T^{-1}. Both changes are one rank-(|drop| + |new|) in-place update.
        """
        S = self.S
        h = S.shape[0]
        left: list[np.ndarray] = []
        right: list[np.ndarray] = []
        if drop.size:
            Sd = S[:, drop]
            X = np.linalg.solve(Sd[drop], Sd.T)  # S_dd^{-1} S_d.
            left.append(-Sd)
            right.append(X.T)
        if new.size:
            # B^T = P[new, slot rows], read along the entering rows of K and B^{-1}
            # (contiguous) rather than down |A| packed rows
            Kn, Bn = self.K[new], self.Binv[new]
            Bt = Kn[:, self.slot_idx[:h]]
            Bt += Bn[:, self.slot_idx[:h]]
            Bt[:, self.slot_idx[:h] < 0] = 0.0  # free slots (their index -1 read a stale column)
            Bt[:, drop] = 0.0  # dropped slots no longer couple
            SB = (Bt @ S).T  # = S B (S is symmetric); OpenBLAS is faster with the few rows first
            if drop.size:
                SB -= Sd @ (X @ Bt.T)
                SB[drop] = 0.0
            C = Kn[:, new] + Bn[:, new]
            C.flat[:: new.size + 1] += self._ridge(new) - 1.0
            T = C - Bt @ SB
            Tinv = spd_inverse(T, overwrite=True) if new.size > 32 else np.linalg.inv(T)
            Tinv = 0.5 * (Tinv + Tinv.T)
            SBT = SB @ Tinv
            left.append(SBT)
            right.append(SB)
        W, Z = np.hstack(left), np.hstack(right)
        # S += W Z^T in place: S is C-contiguous, so S.T is the Fortran array S^T += Z W^T
        out = blas.dgemm(1.0, Z, W, beta=1.0, c=S.T, trans_b=1, overwrite_c=1)
        if not np.shares_memory(out, S):  # pragma: no cover - f2py copied after all
            S[:] = out.T
        if drop.size:
            S[drop, :] = 0.0
            S[:, drop] = 0.0
            self.slot_idx[drop] = -1
        if new.size:
            free = np.flatnonzero(self.slot_idx < 0)[: new.size]
            if free.size < new.size:  # grow, with spare free slots for the next entries
                need = h + new.size - free.size
                self._resize(need + min(max(SLACK, h // 8), self.n - need))
                S = self.S
                free = np.concatenate([free, np.arange(h, h + new.size - free.size)])
            S[:h, free] = -SBT
            S[free, :h] = -SBT.T
            S[np.ix_(free, free)] = Tinv
            self._store_rows(free, new, Kn, Bn)

    # -- the step ---------------------------------------------------------------------------
    def apply(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """delta = B^{-1} K_{:,A} z and K delta = P_{:,A} z for z indexed by slot (zero on free
        slots).

        K and B^{-1} are symmetric, so their columns in A are read as the packed rows: the step
        costs O(n |A|), not O(n^2)."""
        n = self.n
        used = np.flatnonzero(self.slot_idx >= 0)
        rows = self.slot_idx[used]
        if self.packed:
            hi = used[-1] + 1 if used.size else 0
            both = z[:hi] @ self.R[:hi]
            Kz, delta = both[:n], -both[n:]
        else:  # K_{:,A} z = K z~ with z~ = z scattered to the members (K is symmetric)
            zt = np.zeros(n)
            zt[rows] = z[used]
            Kz, delta = self.K @ zt, -(self.Binv @ zt)
        delta[rows] += z[used]
        Kdelta = Kz - delta
        return delta, Kdelta

    def _residual(self, eA: np.ndarray, z: np.ndarray, Kdelta: np.ndarray) -> np.ndarray:
        used = self.slot_idx >= 0
        r = eA - (self._ridge(self.slot_idx) * z + Kdelta[self.slot_idx])
        r[~used] = 0.0
        return r

    def solve(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Solve (c I + P_AA) z = e_A, e of length n; return (delta, K delta)."""
        eA = e[self.slot_idx]  # free slots read e[-1]: S is zero there, so z is too
        eA[self.slot_idx < 0] = 0.0
        scale = np.linalg.norm(eA)
        z = blas.dsymv(1.0, self.S.T, eA, lower=1)  # S z, reading one triangle of S
        delta, Kdelta = self.apply(z)
        r = self._residual(eA, z, Kdelta)
        if np.linalg.norm(r) <= RESIDUAL_TOL * scale:
            return delta, Kdelta
        z = z + self.S @ r  # one step of iterative refinement
        delta, Kdelta = self.apply(z)
        if np.linalg.norm(self._residual(eA, z, Kdelta)) <= RESIDUAL_TOL * scale:
            return delta, Kdelta
        self._refactor(self.idx)
        eA = e[self.slot_idx]
        return self.apply(self.S @ eA)
