"""Kernel functions shared by every kernel estimator in the package.

k_rbf(x, z) = exp(-gamma ||x - z||^2) (LIBSVM's -g; unit diagonal),
k_poly(x, z) = (gamma <x, z> + coef0)^degree, k_linear(x, z) = <x, z>.
"precomputed" means X already holds kernel values: (n, n) at fit, (n_test, n_train) after.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel

from ._linalg import symmetrize_from_upper

KERNELS = ("linear", "rbf", "poly", "precomputed")


def resolve_gamma(gamma: float | None, n_features: int) -> float:
    """gamma=None means 1/d, the centre of the paper's grid {2^j / d}."""
    return 1.0 / n_features if gamma is None else float(gamma)


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


def gram_matrix(X, *, kernel: str, gamma: float, degree: int = 3, coef0: float = 1.0) -> np.ndarray:
    """Symmetric training Gram matrix, (n, n) float64."""
    K = kernel_matrix(X, X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
    if kernel == "precomputed":
        if K.shape[0] != K.shape[1]:
            raise ValueError(f"X: a precomputed kernel must be square at fit, got {K.shape}")
        K = K.copy()
    # rounding can leave K[i, j] != K[j, i]; the algorithm assumes exact symmetry
    return symmetrize_from_upper(K)


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
