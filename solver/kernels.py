"""Kernel functions shared by every kernel estimator in the package.

k_rbf(x, z) = exp(-gamma ||x - z||^2) (LIBSVM's -g; unit diagonal),
k_poly(x, z) = (gamma <x, z> + coef0)^degree, k_linear(x, z) = <x, z>.
"precomputed" means X already holds kernel values: (n, n) at fit, (n_test, n_train) after.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import sparse
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel

from ._linalg import symmetrize_from_upper

KERNELS = ("linear", "rbf", "poly", "precomputed")
# Products x_i . x_j per block of a Gram matrix computed with a check between blocks.
GRAM_BLOCK_WORK = 2e9
# The named kernel widths (scikit-learn's): "scale" = 1 / (d Var(X)), "auto" = 1 / d.
GAMMA_NAMES = ("scale", "auto")
# Rows per block of the variance of dense X (a block's copy, not X's, is the extra memory).
VARIANCE_BLOCK = 4096


def resolve_gamma(gamma: float | str | None, X) -> float:
    """The kernel width a fit on X (n, d; dense or CSR) uses, as scikit-learn's SVC spells it:
    ``"scale"`` (the default) 1 / (d Var(X)), Var over every entry of X (1.0 when X is
    constant); ``"auto"`` 1 / d, the centre of the paper's grid {2^j / d}; None the same as
    ``"auto"`` (the default before "scale": models and requests saved with it keep their
    width); a number is used as given."""
    d = max(X.shape[1], 1)
    if gamma is None or gamma == "auto":
        return 1.0 / d
    if gamma == "scale":
        var = feature_variance(X)
        return 1.0 / (d * var) if var > 0 else 1.0
    return float(gamma)


def feature_variance(X) -> float:
    """Var(X) over every entry of X (numpy's ``X.var()``, ddof 0), without a copy of X: dense
    rows in blocks of VARIANCE_BLOCK, CSR from its stored values."""
    n, d = X.shape
    size = n * d
    if size == 0:
        return 0.0
    if sparse.issparse(X):
        data = X.data
        mean = float(data.sum()) / size
        # the zeros contribute mean^2 each
        return max(float(np.dot(data - mean, data - mean)) + (size - data.size) * mean**2,
                   0.0) / size
    X = np.asarray(X)
    mean = float(X.sum(dtype=np.float64)) / size
    total = 0.0
    for i in range(0, n, VARIANCE_BLOCK):
        block = X[i:i + VARIANCE_BLOCK] - mean
        total += float(np.einsum("ij,ij->", block, block))
    return total / size


def kernel_matrix(X, Z, *, kernel: str, gamma: float, degree: int = 3,
                  coef0: float = 1.0) -> np.ndarray:
    """Dense C-contiguous float64 K[i, j] = k(X[i], Z[j]), shape (len(X), len(Z))."""
    if kernel == "rbf":
        K = rbf_kernel(X, Z, gamma=gamma)
    elif kernel == "poly":
        K = polynomial_kernel(X, Z, degree=degree, gamma=gamma, coef0=coef0)
    elif kernel == "linear":
        K = linear_kernel(X, Z)
    elif kernel == "precomputed":
        K = X.toarray() if sparse.issparse(X) else X
    else:
        raise ValueError(f"kernel: unknown kernel {kernel!r}; use one of {KERNELS}")
    return np.ascontiguousarray(K, dtype=np.float64)


def gram_matrix(X, *, kernel: str, gamma: float, degree: int = 3, coef0: float = 1.0,
                check: Callable[[int], None] | None = None) -> np.ndarray:
    """Symmetric training Gram matrix, (n, n) float64. With ``check``, computed a block of
    rows at a time (about GRAM_BLOCK_WORK n d products each), ``check(rows done)`` called
    after each: an exception it raises stops the computation within a block."""
    args = {"kernel": kernel, "gamma": gamma, "degree": degree, "coef0": coef0}
    if check is not None and kernel != "precomputed":
        K = _gram_in_blocks(X, args, check)
    else:
        K = kernel_matrix(X, X, **args)
    if kernel == "precomputed":
        if K.shape[0] != K.shape[1]:
            raise ValueError(f"X: a precomputed kernel must be square at fit, got {K.shape}")
        K = K.copy()
    # rounding can leave K[i, j] != K[j, i]; the algorithm assumes exact symmetry
    return symmetrize_from_upper(K)


def _gram_in_blocks(X, args: dict, check: Callable[[int], None]) -> np.ndarray:
    n, d = X.shape
    K = np.empty((n, n))
    step = max(1, int(GRAM_BLOCK_WORK // max(n * max(d, 1), 1)))
    for i in range(0, n, step):
        K[i:i + step] = kernel_matrix(X[i:i + step], X, **args)
        check(min(i + step, n))
    return K


def kernel_diagonal(X, *, kernel: str, gamma: float, degree: int = 3,
                    coef0: float = 1.0) -> np.ndarray:
    """k(x_i, x_i) for each row, without forming the full matrix."""
    if kernel == "rbf":
        return np.ones(X.shape[0])
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel() if sparse.issparse(X) else np.einsum(
        "ij,ij->i", X, X)
    if kernel == "poly":
        return (gamma * sq + coef0) ** degree
    if kernel == "linear":
        return sq
    raise ValueError("kernel_diagonal: not defined for a precomputed kernel")
