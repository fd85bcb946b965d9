"""Dense SPD helpers that work in place, so that n x n kernel matrices are not copied needlessly."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

_BLOCK = 1024
# Flops (n^2 b) per block of the blocked inverse: a check between blocks every second or so.
SWEEP_BLOCK_WORK = 1e10


def symmetrize_from_upper(A: np.ndarray) -> np.ndarray:
    """Copy the upper triangle onto the lower one, block by block (no n x n temporaries)."""
    n = A.shape[0]
    strictly_lower = np.tri(min(n, _BLOCK), k=-1, dtype=bool)
    for i in range(0, n, _BLOCK):
        bi = slice(i, min(i + _BLOCK, n))
        size = bi.stop - bi.start
        np.copyto(A[bi, bi], A[bi, bi].T, where=strictly_lower[:size, :size])
        for j in range(i + _BLOCK, n, _BLOCK):
            bj = slice(j, min(j + _BLOCK, n))
            A[bj, bi] = A[bi, bj].T
    return A


def spd_inverse(A: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """Inverse of a symmetric positive definite matrix by Cholesky (LAPACK potrf + potri).

    Raises numpy.linalg.LinAlgError if A is not numerically positive definite."""
    work = A if overwrite else A.copy(order="F")
    if not work.flags.f_contiguous and not work.flags.c_contiguous:
        work = np.array(work, order="F")
    # A symmetric C-ordered array is its own Fortran-ordered transpose: pass it as "lower".
    lower = 0 if work.flags.f_contiguous else 1
    arr = work if work.flags.f_contiguous else work.T
    c, info = lapack.dpotrf(arr, lower=lower, clean=0, overwrite_a=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix is not positive definite (potrf info={info})")
    inv, info = lapack.dpotri(c, lower=lower, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"inverse failed (potri info={info})")
    out = inv if work.flags.f_contiguous else inv.T
    # potri fills one triangle; in C order that is the upper one of `out` in both cases
    if not out.flags.c_contiguous:
        out = np.ascontiguousarray(out)
    return symmetrize_from_upper(out)


def sweep_block(n: int) -> int:
    """Pivots per block of ``spd_inverse_blocked``: each block's update is n^2 b flops, kept
    near SWEEP_BLOCK_WORK (under a second on one core) so that a check between blocks comes
    often; at least 32 pivots (BLAS-3 efficiency), at most 512."""
    return int(min(512, max(32, SWEEP_BLOCK_WORK // max(n * n, 1))))


def spd_inverse_blocked(A: np.ndarray, *, check: Callable[[int], None] | None = None,
                        block: int | None = None) -> np.ndarray:
    """In-place inverse of a symmetric positive definite C-contiguous A by the symmetric sweep
    operator, a block of b pivots at a time (n^3 flops in all, as Cholesky + its inverse).

    Sweeping block P of the current matrix M (its unswept part's Schur complement M_PP is SPD,
    M_PP = L L^T): with C = M[:, P] and D = M_PP^{-1},
        M_QQ -= C_Q D C_Q^T  (Q: every other index; a rank-b dsyrk of W = C_Q L^{-T}),
        M_QP = C_Q D,  M_PP = -D,
    and after every block M = -A^{-1}. Only one triangle is kept (the upper one of A), then
    copied. ``check(done)`` is called after each block with the pivots swept so far: an
    exception it raises (a cancelled job) stops the inverse within one block's time; A is then
    left partly swept.

    Raises numpy.linalg.LinAlgError if A is not numerically positive definite."""
    n = A.shape[0]
    if not A.flags.c_contiguous:
        raise ValueError("spd_inverse_blocked: A must be C-contiguous")
    M = A.T  # Fortran-ordered, the same symmetric values: its lower triangle is A's upper one
    b = block or sweep_block(n)
    W = np.zeros((n, b), order="F")
    for k0 in range(0, n, b):
        k1 = min(k0 + b, n)
        m = k1 - k0
        L, info = lapack.dpotrf(M[k0:k1, k0:k1], lower=1, clean=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"matrix is not positive definite (pivot {k0 + info})")
        C = np.vstack([M[k0:k1, :k0].T, M[k1:, k0:k1]])  # M[Q, P], Q = the other indices
        CT = linalg.solve_triangular(L, C.T, lower=True, check_finite=False)  # L^{-1} C^T
        Wb = W[:, :m]
        Wb[:k0], Wb[k0:k1], Wb[k1:] = CT[:, :k0].T, 0.0, CT[:, k0:].T
        blas.dsyrk(-1.0, Wb, beta=1.0, c=M, lower=1, overwrite_c=1)
        D = linalg.cho_solve((L, True), np.eye(m), check_finite=False)
        CD = C @ D
        M[k0:k1, :k0] = CD[:k0].T
        M[k1:, k0:k1] = CD[k0:]
        M[k0:k1, k0:k1] = -D
        if check is not None:
            check(k1)
    np.negative(A, out=A)
    return symmetrize_from_upper(A)


# The check the inverses taken inside ``inverse_checks`` call between blocks (None: none).
_CHECK: ContextVar[Callable[[int], None] | None] = ContextVar("inverse_check", default=None)
# Below this size an inverse takes well under a second: LAPACK's in one call.
CHECKED_MIN = 1024


@contextlib.contextmanager
def inverse_checks(check: Callable[[int], None] | None) -> Iterator[None]:
    """Within this context, ``spd_inverse_checked`` of a matrix of CHECKED_MIN rows or more
    is taken in blocks that call ``check`` (the exact kernel's active-set refactorisations,
    which at |A| ~ n / 2 are as long as the kernel inverse itself)."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def spd_inverse_checked(A: np.ndarray) -> np.ndarray:
    """``spd_inverse(A, overwrite=True)``, or the blocked sweep calling the context's check
    when one is set (``inverse_checks``) and A has CHECKED_MIN rows or more."""
    check = _CHECK.get()
    if check is None or A.shape[0] < CHECKED_MIN or not A.flags.c_contiguous:
        return spd_inverse(A, overwrite=True)
    return spd_inverse_blocked(A, check=check)
