"""The MSVMAv estimator (Qian, Ai, Zhang, Gao, IJCAI 2022) with scikit-learn conventions."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.kernel_approximation import Nystroem
from sklearn.utils._param_validation import Interval, StrOptions
from threadpoolctl import ThreadpoolController

from ._active_set import DualSystem
from ._base import Callback, MarginClassifier, to_dense_rows
from ._msvmav_core import DualSpace, PrimalSpace, iterate
from .kernels import KERNELS, gram_matrix, kernel_diagonal, kernel_matrix, resolve_gamma
from .margins import kernel_rademacher_terms, linear_rademacher_terms

# Exact kernel MSVMAv holds about four n x n float64 arrays at its peak.
EXACT_KERNEL_ARRAYS = 4
# Below this dimension the linear path's BLAS calls are too small to gain from threads.
SMALL_SYSTEM = 512
# Below this many training rows the exact kernel iterations run on one BLAS thread.
SMALL_KERNEL = 8192
_THREADPOOLS = ThreadpoolController()  # inspecting the loaded libraries once costs ~20 ms


def augment(X):
    """Append the paper's constant-1 feature (the bias is a coordinate of w, inside ||w|| = 1).

    CSR input stays CSR: the 1 is written as the last entry of each row directly (scipy's
    hstack costs several passes over the data)."""
    n, d = X.shape
    if not sparse.issparse(X):
        return np.hstack([X, np.ones((n, 1))])
    X = X.tocsr()
    indptr = X.indptr + np.arange(n + 1, dtype=X.indptr.dtype)
    bias = indptr[1:] - 1
    keep = np.ones(X.nnz + n, dtype=bool)
    keep[bias] = False
    indices = np.empty(X.nnz + n, dtype=X.indices.dtype)
    data = np.empty(X.nnz + n)
    indices[keep], data[keep] = X.indices, X.data
    indices[bias], data[bias] = d, 1.0
    return sparse.csr_matrix((data, indices, indptr), shape=(n, d + 1))


class MSVMAv(MarginClassifier):
    """Margin distribution machine: maximise the average margin, minimise its semi-variance.

    Parameters
    ----------
    alpha : float > 0, default 16
        Weight of the proximal term of the average-margin step (large alpha = small step).
        The defaults (16, 0.25) are the authors' demo values, on the paper's grid.
    beta : float > 0, default 0.25
        Weight of the proximal term of the semi-variance step (large beta = small step;
        beta -> inf keeps the initial MAMC direction).
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0 or None
        Kernel width for "rbf"/"poly"; None means 1 / n_features.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    max_iter : int >= 0
        Iteration cap T (the paper uses 100). max_iter=0 returns the MAMC initialisation.
    tol : float >= 0
        Stop when ||w_k - w_{k-1}|| / sqrt(dim) < tol.
    fit_intercept : bool
        Linear kernel: append the constant-1 feature (paper's protocol). Kernels have no bias.
    update : {"woodbury", "direct"}
        Linear solver: keep the active-set system current by low-rank updates, or rebuild and
        refactor it every iteration (reference path; same result).
    approximation : {"auto", "exact", "nystroem"}
        Kernels only. "auto" uses the exact Gram matrix when about four n x n float64 arrays fit in
        ``kernel_memory_mb``, otherwise a Nystroem feature map with ``n_components`` landmarks.
    n_components : int
        Nystroem landmarks (uniformly sampled training rows).
    kernel_memory_mb : float
        Memory budget for the exact kernel path under approximation="auto".
    random_state : int or None
        Seed for the Nystroem landmark sample.

    Attributes
    ----------
    classes_ : (k,) array of the class labels; for two classes classes_[1] is the positive one.
    coef_ : (1, d) or (k, d)   — linear kernel; intercept_ : (1,) or (k,)
    dual_coef_ : (m,) or (m, k) — kernels: f(x) = K(x, X_fit_) @ dual_coef_
    X_fit_ : (m, d) training rows (exact) or landmarks (Nystroem); None for "precomputed"
    n_iter_ : int, iterations run (max over one-vs-rest tasks)
    history_ : list of dicts, one per iteration and task: theta, semivariance, objective
        (= SV / theta^2), active (|A_k|), flipped (sign safeguard fired), step.
    kernel_approximation_ : "exact" or "nystroem" (kernels), None for linear
    stopped_early_ : bool, True if the callback stopped the fit
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "kernel": [StrOptions(set(KERNELS))],
        "gamma": [None, Interval(Real, 0, None, closed="neither")],
        "degree": [Interval(Integral, 0, None, closed="left")],
        "coef0": [Real],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
        "update": [StrOptions({"woodbury", "direct"})],
        "approximation": [StrOptions({"auto", "exact", "nystroem"})],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "kernel_memory_mb": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
    _array_attrs = ("coef_", "intercept_", "dual_coef_", "X_fit_")
    _json_attrs = ("n_iter_", "history_", "kernel_approximation_", "gamma_", "fit_info_")

    def __init__(self, alpha: float = 16.0, beta: float = 0.25, *, kernel: str = "linear",
                 gamma: float | None = None, degree: int = 3, coef0: float = 1.0,
                 max_iter: int = 100, tol: float = 1e-8, fit_intercept: bool = True,
                 update: str = "woodbury", approximation: str = "auto",
                 n_components: int = 1000, kernel_memory_mb: float = 8192,
                 random_state: int | None = None) -> None:
        self.alpha = alpha
        self.beta = beta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.max_iter = max_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.update = update
        self.approximation = approximation
        self.n_components = n_components
        self.kernel_memory_mb = kernel_memory_mb
        self.random_state = random_state

    # -- fitting ---------------------------------------------------------------------------
    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        self.history_ = []
        self.coef_ = self.intercept_ = self.dual_coef_ = self.X_fit_ = None
        self.kernel_approximation_ = None
        self.gamma_ = None
        if self.kernel == "linear":
            self._fit_linear(X, Y, callback)
        else:
            self.gamma_ = resolve_gamma(self.gamma, X.shape[1])
            if self._use_nystroem(X.shape[0]):
                self._fit_nystroem(X, Y, callback)
            else:
                self._fit_exact_kernel(X, Y, callback)

    def _run(self, space, y, callback, task, n_tasks):
        coef, n_iter, history, stopped = iterate(
            space, y, alpha=self.alpha, max_iter=self.max_iter, tol=self.tol,
            callback=callback, task=task, n_tasks=n_tasks)
        self.history_.extend(history)
        self.n_iter_ = max(getattr(self, "n_iter_", 0), n_iter) if task else n_iter
        self.stopped_early_ = self.stopped_early_ or stopped
        return coef, space

    def _fit_linear(self, X, Y, callback) -> None:
        Xa = augment(X) if self.fit_intercept else X
        d, T = X.shape[1], Y.shape[1]
        # D x D systems this small run faster on one BLAS thread than on several
        with _THREADPOOLS.limit(limits=1 if Xa.shape[1] < SMALL_SYSTEM else None,
                                user_api="blas"):
            self._fit_linear_tasks(Xa, Y, callback, d, T)

    def _fit_linear_tasks(self, Xa, Y, callback, d: int, T: int) -> None:
        W = np.zeros((T, Xa.shape[1]))
        info = {"refactorisations": 0, "low_rank_updates": 0}
        for t in range(T):
            y = Y[:, t]
            space = PrimalSpace(Xa, y, self.beta, shift=np.asarray(Xa.T @ y).ravel(),
                                update=self.update)
            W[t], space = self._run(space, y, callback, t, T)
            info["refactorisations"] += space.system.n_refactor
            info["low_rank_updates"] += space.system.n_updates
            if self.stopped_early_:
                break
        self.coef_ = W[:, :d].copy()
        self.intercept_ = W[:, d].copy() if self.fit_intercept else np.zeros(T)
        self.fit_info_ = info

    def _use_nystroem(self, n: int) -> bool:
        if self.approximation != "auto":
            return self.approximation == "nystroem"
        if self.kernel == "precomputed":
            return False
        return EXACT_KERNEL_ARRAYS * 8.0 * n * n / 2**20 > self.kernel_memory_mb

    def _kernel_args(self) -> dict:
        return {"kernel": self.kernel, "gamma": self.gamma_, "degree": self.degree,
                "coef0": self.coef0}

    def _fit_exact_kernel(self, X, Y, callback) -> None:
        n, T = X.shape[0], Y.shape[1]
        # Below SMALL_KERNEL rows, only the inverse uses two BLAS threads. The Gram matrix's
        # product is small, and the iterations are memory-bound matrix-vector work where a
        # second thread costs more in wake-ups than it gains. (numpy and scipy load separate
        # OpenBLAS pools; a pool's idle threads keep spinning, slowing the other pool's work.)
        small = {"limits": 1 if n < SMALL_KERNEL else None, "user_api": "blas"}
        with _THREADPOOLS.limit(**small):
            K = gram_matrix(X, **self._kernel_args())
        pair = DualSystem.pair(K)  # K and (I + K)^{-1}, shared by every one-vs-rest task
        with _THREADPOOLS.limit(**small):
            A, info = self._fit_kernel_tasks(pair, Y, callback)
        self.dual_coef_ = A[:, 0].copy() if T == 1 else A
        self.X_fit_ = None if self.kernel == "precomputed" else to_dense_rows(X)
        self.kernel_approximation_ = "exact"
        self.fit_info_ = info

    def _fit_kernel_tasks(self, pair, Y, callback) -> tuple[np.ndarray, dict]:
        T = Y.shape[1]
        A = np.zeros((pair[0].shape[0], T))
        info = {"refactorisations": 0, "low_rank_updates": 0}
        for t in range(T):
            space = DualSpace(pair, Y[:, t], self.beta)
            A[:, t], space = self._run(space, Y[:, t], callback, t, T)
            info["refactorisations"] += space.system.n_refactor
            info["low_rank_updates"] += space.system.n_updates
            if self.stopped_early_:
                break
        return A, info

    def _fit_nystroem(self, X, Y, callback) -> None:
        if self.kernel == "precomputed":
            raise ValueError("approximation: 'nystroem' needs feature rows, not a precomputed "
                             "kernel")
        n = X.shape[0]
        ny = Nystroem(kernel=self.kernel, gamma=self.gamma_, degree=self.degree,
                      coef0=self.coef0, n_components=min(self.n_components, n),
                      random_state=self.random_state).fit(X)
        Phi = ny.transform(X)
        # Rotate to the eigenbasis of Phi^T Phi: Phi V = U Sigma; work with X_r = U Sigma^2 and
        # coordinates u (f = X_r u, ||f||_H = ||Sigma u||), where the prox metric is diagonal.
        lam, V = np.linalg.eigh(Phi.T @ Phi)
        keep = lam > 1e-12 * max(lam.max(), 1e-300)
        lam, V = lam[keep], V[:, keep]
        sig = np.sqrt(lam)
        PV = Phi @ V  # = U Sigma
        del Phi
        Xr = PV * sig
        T = Y.shape[1]
        coefs = np.zeros((V.shape[0], T))
        info = {"refactorisations": 0, "low_rank_updates": 0, "n_components": int(keep.sum())}
        for t in range(T):
            y = Y[:, t]
            shift = (PV.T @ y) / sig  # U^T y
            space = PrimalSpace(Xr, y, self.beta, shift=shift, base_extra=lam, mu=lam,
                                update=self.update)
            u, space = self._run(space, y, callback, t, T)
            coefs[:, t] = V @ (sig * u)
            info["refactorisations"] += space.system.n_refactor
            info["low_rank_updates"] += space.system.n_updates
            if self.stopped_early_:
                break
        dual = ny.normalization_.T @ coefs
        self.dual_coef_ = dual[:, 0].copy() if T == 1 else dual
        self.X_fit_ = to_dense_rows(ny.components_)
        self.kernel_approximation_ = "nystroem"
        self.fit_info_ = info

    # -- prediction ------------------------------------------------------------------------
    def _decision(self, X) -> np.ndarray:
        if self.kernel == "linear":
            return np.asarray(X @ self.coef_.T) + self.intercept_
        Kx = X.toarray() if self.kernel == "precomputed" and sparse.issparse(X) else X
        if self.kernel != "precomputed":
            Kx = kernel_matrix(X, self.X_fit_, **self._kernel_args())
        D = np.asarray(Kx @ self.dual_coef_)
        return D[:, None] if D.ndim == 1 else D

    def _theorem_terms(self, X) -> dict:
        if self.kernel == "linear":
            Xa = augment(X) if self.fit_intercept else X
            sq = (np.asarray(Xa.multiply(Xa).sum(axis=1)).ravel() if sparse.issparse(Xa)
                  else np.einsum("ij,ij->i", Xa, Xa))
            return linear_rademacher_terms(np.sqrt(sq), X.shape[0])
        if self.kernel == "precomputed":
            return {}
        return kernel_rademacher_terms(kernel_diagonal(X, **self._kernel_args()))
