"""Least-squares SVM (docs/algorithm.md, "LSSVM"): closed form, free unregularised bias."""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy import sparse

from solver.params import Interval

from .._base import Callback
from .._footprint import FLOAT, FitEstimate, dense_rows_bytes, gram_bytes, labels_bytes, n_targets
from ..kernels import resolve_gamma
from ._common import KERNEL_CONSTRAINTS, ExpansionClassifier, cholesky_solve_inplace


class LSSVM(ExpansionClassifier):
    """LS-SVM classifier: min 1/2 ||w||^2 + C/2 sum_i e_i^2, y_i - <w, phi(x_i)> - b = e_i.

    For +-1 labels this is ridge regression on the labels with an unpenalised intercept
    (LS-SVMlab's regression form, identical to its classifier form). ``C`` is LS-SVMlab's
    ``gam``; for the RBF kernel LS-SVMlab's ``sig2`` is 1 / gamma. No extra preprocessing
    (LS-SVMlab's default z-scoring is not applied). One-vs-rest for more than two classes; all
    targets share one factorisation.

    Linear kernel: the primal system (Xc^T Xc + I/C) w = Xc^T yc with centred X and y and
    b = mean(y) - mean(x)^T w; for sparse X the centred Gram matrix is formed as
    X^T X - n xbar xbar^T without densifying X. When d > n the same model is computed from the
    n x n dual system with a linear kernel (cheaper), and w = X^T alpha.
    Other kernels: one Cholesky factorisation of H = K + I/C and two solves,
    nu = H^{-1} 1, v = H^{-1} y, b = 1^T v / 1^T nu, alpha = v - b nu.

    Parameters
    ----------
    C : float > 0
        Weight of the squared errors (LS-SVMlab ``gam``).
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0, "scale" (default), "auto" or None
        Kernel width for "rbf"/"poly", as scikit-learn's SVC: "scale" 1 / (d Var(X)), "auto"
        (and None, the default before "scale") 1 / d.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.

    Attributes
    ----------
    classes_, coef_, intercept_, dual_coef_, X_fit_ : the expansion ``ExpansionClassifier``
        describes; here dual_coef_, (n,) or (n, T), is the non-sparse alpha and X_fit_ every
        training row (None for "precomputed").
    gamma_ : float or None, the gamma actually used.
    jitter_ : float
        Diagonal jitter the Cholesky fallback had to add (0.0 normally).
    solver_ : {"primal", "dual"}, which system was solved.
    n_iter_ : int, always 0 (closed form).
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        **KERNEL_CONSTRAINTS,
    }
    _json_attrs = ("gamma_", "n_iter_", "jitter_", "solver_")

    def __init__(self, C: float = 1.0, *, kernel: str = "linear",
                 gamma: float | str | None = "scale",
                 degree: int = 3, coef0: float = 1.0,
                 calibration: str = "none") -> None:
        self.C = C
        self.calibration = calibration
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0

    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        n, d = n_samples, n_features
        T = n_targets(n_classes)
        fixed = labels_bytes(n, n_classes) + FLOAT * n * (T + 1) * 3  # right-hand sides
        advice = ("LSSVM solves a dense min(n, d)^2 system (n^2 for kernels): use fewer rows "
                  "or features, or MSVMAv (linear_solver='cg', approximation='auto')")
        kind = self.kernel_kind
        if kind.primal and d <= n:
            # X^T X (the sparse product first for CSR), its symmetrised copy and the outer
            # product of the means; dense X is centred into a copy
            product = dense_rows_bytes(n, d) if nnz is None else 12 * min(d * d, nnz * d)
            peak = 4 * FLOAT * d * d + product + fixed
            return FitEstimate(int(peak), "lssvm-primal", advice)
        rows = dense_rows_bytes(n, d) if kind.on_features and not kind.primal else 0
        peak = gram_bytes(n, d, nnz, kind) + rows + fixed
        return FitEstimate(int(peak), "lssvm-dual", advice)

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        self._reset_fitted()
        n, d = X.shape
        kind = self.kernel_kind
        if kind.primal and d <= n:
            self.solver_ = "primal"
            self.coef_, self.intercept_, self.jitter_ = self._solve_primal(X, Y)
            return
        self.solver_ = "dual"
        if not kind.primal:
            self.gamma_ = resolve_gamma(self.gamma, X)
        K = self.kernel_.gram(X)
        A, b, self.jitter_ = solve_kkt(K, Y, self.C)
        if kind.primal:
            self.coef_ = np.asarray(X.T @ A).T.copy()  # w = X^T alpha
            self.intercept_ = b
        else:
            self._set_kernel_model(A, X, b)

    def _solve_primal(self, X, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        n = X.shape[0]
        xbar = np.asarray(X.mean(axis=0)).ravel()
        ybar = Y.mean(axis=0)
        if sparse.issparse(X):
            # centring would densify X; the centred Gram is X^T X - n xbar xbar^T
            G = np.asarray((X.T @ X).toarray()) - n * np.outer(xbar, xbar)
        else:
            Xc = X - xbar
            G = Xc.T @ Xc
        G = np.ascontiguousarray(0.5 * (G + G.T))  # exact symmetry for the in-place Cholesky
        G[np.diag_indices_from(G)] += 1.0 / self.C
        rhs = np.asarray(X.T @ (Y - ybar))  # = Xc^T yc because yc sums to zero
        W, jitter = cholesky_solve_inplace(G, rhs)
        return W.T.copy(), ybar - xbar @ W, jitter


def solve_kkt(K: np.ndarray, Y: np.ndarray, C: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Solve [[0, 1^T], [1, K + I/C]] [b; alpha] = [0; y] for every column of Y.

    K (n x n, symmetric) is overwritten. Returns alpha (n, T), b (T,) and the jitter used."""
    n = K.shape[0]
    K[np.diag_indices(n)] += 1.0 / C
    rhs = np.hstack([np.ones((n, 1)), Y])
    S, jitter = cholesky_solve_inplace(K, rhs)
    nu, V = S[:, 0], S[:, 1:]
    b = V.sum(axis=0) / nu.sum()
    A = V - np.outer(nu, b)
    return A, b, jitter
