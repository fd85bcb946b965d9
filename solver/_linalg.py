"""Dense SPD helpers that work in place, so that n x n kernel matrices are not copied needlessly."""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

_BLOCK = 1024


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
