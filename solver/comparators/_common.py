"""What the six comparators share: the fitted representation, kernel parameters, the callback's
stop signal as a bool, and two small numerical helpers (an in-place Cholesky solve with a jitter
fallback, an int32-index CSR copy).

Every comparator stores its model as one of two expansions, so that prediction and persistence
are written once and ``to_dict`` only ever holds numpy arrays and JSON:

* linear kernel:  f(x) = x @ coef_.T + intercept_              coef_ (T, d), intercept_ (T,)
* other kernels:  f(x) = k(x, X_fit_) @ dual_coef_ + intercept_  dual_coef_ (m,) or (m, T)

T = 1 for two classes, T = k (one-vs-rest) otherwise. Kernel models without a bias
(docs/algorithm.md, "Bias by method") store intercept_ = 0.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from scipy.linalg import lapack

from solver.params import Interval, StrOptions

from .._base import Callback, FitStopped, MarginClassifier, report, to_dense_rows
from .._linalg import symmetrize_from_upper
from ..kernels import GAMMA_NAMES, KERNELS

KERNEL_CONSTRAINTS: dict[str, list] = {
    "kernel": [StrOptions(set(KERNELS))],
    "gamma": [None, StrOptions(GAMMA_NAMES), Interval(Real, 0, None, closed="neither")],
    "degree": [Interval(Integral, 0, None, closed="left")],
    "coef0": [Real],
}

# Cholesky jitter fallback: first jitter relative to the mean diagonal, growth factor, last try.
JITTER_START = 1e-12
JITTER_GROWTH = 10.0
JITTER_MAX = 1e-2


class ExpansionClassifier(MarginClassifier):
    """Base of the comparators: prediction from a linear or a kernel expansion (see module doc).

    classes_ (k,) are the class labels (for two classes classes_[1] is the positive one);
    coef_ (T, d) and intercept_ (T,) the linear expansion, f(x) = x @ coef_.T + intercept_;
    dual_coef_ (m,) or (m, T) and X_fit_ (m, d) the kernel one, f(x) = k(x, X_fit_) @
    dual_coef_ + intercept_ (X_fit_ None for "precomputed").

    Subclasses implement ``_fit_targets`` and fill ``coef_``/``intercept_`` (linear) or
    ``dual_coef_``/``X_fit_``/``intercept_`` (kernels); ``support_`` optionally lists the training
    rows behind ``X_fit_`` (needed to predict from a precomputed kernel when only some rows are
    kept, as for the SVM's support vectors).
    """

    _array_attrs: ClassVar[tuple[str, ...]] = (
        "coef_", "intercept_", "dual_coef_", "X_fit_", "support_")
    _json_attrs: ClassVar[tuple[str, ...]] = ("gamma_", "n_iter_")

    def _reset_fitted(self) -> None:
        self.coef_ = self.intercept_ = self.dual_coef_ = self.X_fit_ = self.support_ = None
        self.gamma_ = None
        self.n_iter_ = 0

    def _stop_requested(self, callback: Callback | None, info: dict) -> bool:
        """Report ``info`` to the callback; True, with ``stopped_early_`` set, if it says stop."""
        try:
            report(callback, info)
        except FitStopped:
            self.stopped_early_ = True
            return True
        return False

    def _set_kernel_model(self, A: np.ndarray, X, intercept: np.ndarray | None = None,
                          support: np.ndarray | None = None) -> None:
        """Store a kernel expansion A (m, T) over the rows X[support] (all rows if None)."""
        T = A.shape[1]
        self.dual_coef_ = A[:, 0].copy() if T == 1 else np.ascontiguousarray(A)
        self.intercept_ = np.zeros(T) if intercept is None else np.asarray(intercept, float)
        self.support_ = None if support is None else np.asarray(support, dtype=np.int64)
        if self.kernel_kind.on_features:
            self.X_fit_ = to_dense_rows(X if support is None else X[support])
        else:
            self.X_fit_ = None  # columns of the test kernel play the role of the rows

    def _decision(self, X) -> np.ndarray:
        kind = self.kernel_kind
        if kind.primal:
            return np.asarray(X @ self.coef_.T) + self.intercept_
        Kx = self.kernel_.matrix(X, self.X_fit_)
        if not kind.on_features and self.support_ is not None:
            Kx = Kx[:, self.support_]
        A = self.dual_coef_
        D = np.asarray(Kx @ (A[:, None] if A.ndim == 1 else A))
        return D + self.intercept_


def split_linear(W: np.ndarray, d: int, has_bias: bool) -> tuple[np.ndarray, np.ndarray]:
    """(T, D) weights over augmented features -> coef_ (T, d) and intercept_ (T,)."""
    coef = np.ascontiguousarray(W[:, :d])
    intercept = W[:, d].copy() if has_bias else np.zeros(W.shape[0])
    return coef, intercept


def cholesky_solve_inplace(H: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, float]:
    """Solve H X = B for symmetric positive definite H by one Cholesky factorisation.

    H (C-contiguous, exactly symmetric) is overwritten. If the factorisation fails, H is
    restored from the triangle LAPACK did not touch and retried with a jitter of
    ``JITTER_START * mean(diag)``, growing by ``JITTER_GROWTH`` up to ``JITTER_MAX * mean(diag)``.

    Returns
    -------
    X : ndarray, same shape as B
    jitter : float
        The jitter that was added to the diagonal (0.0 when H was positive definite).
    """
    if not H.flags.c_contiguous:
        H = np.ascontiguousarray(H)
    n = H.shape[0]
    diag = H.diagonal().copy()
    scale = float(np.mean(np.abs(diag))) or 1.0
    # A symmetric C-ordered array is its own transpose in Fortran order: potrf on H.T
    # ("lower") works in place and leaves the C-lower triangle of H intact for a retry.
    Hf = H.T
    jitter = 0.0
    while True:
        c, info = lapack.dpotrf(Hf, lower=1, overwrite_a=1, clean=0)
        if info == 0:
            break
        jitter = JITTER_START * scale if jitter == 0.0 else jitter * JITTER_GROWTH
        if jitter > JITTER_MAX * scale:
            raise np.linalg.LinAlgError(
                "matrix is not positive definite even with a diagonal jitter of "
                f"{JITTER_MAX:g} x its mean diagonal")
        symmetrize_from_upper(Hf)  # copy the intact triangle back over the factor
        H[np.diag_indices(n)] = diag + jitter
    rhs = np.asfortranarray(B, dtype=np.float64)
    X, info = lapack.dpotrs(c, rhs, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"triangular solve failed (potrs info={info})")
    return np.ascontiguousarray(X), jitter
