"""Fast margin maximisation via dual acceleration (Ji, Srebro, Telgarsky, ICML 2021;
docs/algorithm.md, "FMM"): normalised gradient descent with momentum on ln sum_i exp(-<z_i, w>)."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from solver.params import Interval

from .._base import Callback
from .._footprint import (
    FLOAT,
    FitEstimate,
    augmented_copy_bytes,
    kernel_matrix_estimate,
    labels_bytes,
    n_targets,
)
from ..kernels import resolve_gamma
from ..msvmav import augment
from ._common import KERNEL_CONSTRAINTS, ExpansionClassifier, split_linear


def _softmax_neg(M: np.ndarray) -> np.ndarray:
    """Column-wise softmax of -M, stabilised by subtracting each column's minimum margin."""
    Q = np.exp(-(M - M.min(axis=0)))
    Q /= Q.sum(axis=0)
    return Q


class FMM(ExpansionClassifier):
    """FMM: maximise the minimum normalised margin min_i <z_i, w> / ||w||, z_i = y_i x~_i.

    Linear (w = 0, g = 0, q = 1/n; rho_t = t / (t + 1)), for t = 0 .. n_iter - 1:

        g <- rho_t (g - Z^T q);   w <- w - eta (g - Z^T q);   q <- softmax(-Z w)

    so the first iterate is eta X~^T y / n, the MAMC direction. x~ = (x; 1) when fit_intercept
    (the paper's augmentation; the bias is an ordinary coordinate). Kernels (no bias) run the
    same recursion on w = Z^T v: u <- rho_t (u - q), v <- v - eta (u - q), q = softmax(-Q v),
    Q = Y K Y, and f(x) = sum_i v_i y_i k(x_i, x). There is no tolerance: ``n_iter`` (the paper's
    T) is the stopping rule. One-vs-rest targets advance together, one callback per iteration.

    Parameters
    ----------
    eta : float > 0
        Step size (the "theta" of both papers).
    n_iter : int >= 1
        Number of iterations T.
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0, "scale" (default), "auto" or None
        Kernel width for "rbf"/"poly", as scikit-learn's SVC: "scale" 1 / (d Var(X)), "auto"
        (and None, the default before "scale") 1 / d.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    fit_intercept : bool
        Linear kernel: append the constant-1 feature. Kernels have no bias.

    Attributes
    ----------
    classes_ : (k,) class labels; for two classes classes_[1] is the positive one.
    coef_ : (T, d) and intercept_ : (T,)
        Linear kernel: f(x) = x @ coef_.T + intercept_ (not normalised; ||w|| grows with t).
    dual_coef_ : (n,) or (n, T)
        Kernels: v * y, f(x) = k(x, X_fit_) @ dual_coef_.
    X_fit_ : (n, d) training rows (None for "precomputed").
    gamma_ : float or None, the gamma actually used.
    n_iter_ : int, iterations run (n_iter unless the callback stopped the fit).
    history_ : list of dicts, one per iteration: iteration, min_margin (smallest normalised
        training margin, min over one-vs-rest targets), theta (mean normalised margin, averaged
        over targets).
    """

    _parameter_constraints: dict = {
        "eta": [Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        **KERNEL_CONSTRAINTS,
        "fit_intercept": ["boolean"],
    }
    _json_attrs = ("gamma_", "n_iter_", "history_")

    def __init__(self, eta: float = 1.0, n_iter: int = 100, *, kernel: str = "linear",
                 gamma: float | str | None = "scale", degree: int = 3, coef0: float = 1.0,
                 fit_intercept: bool = True, calibration: str = "none") -> None:
        self.eta = eta
        self.calibration = calibration
        self.n_iter = n_iter
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.fit_intercept = fit_intercept

    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        n, d = n_samples, n_features
        T = n_targets(n_classes)
        fixed = labels_bytes(n, n_classes) + 8 * FLOAT * n * T  # Q, margins, softmax temps
        if self.kernel_kind.primal:
            copy = augmented_copy_bytes(n, d, nnz) if self.fit_intercept else 0
            return FitEstimate(int(copy + 4 * FLOAT * (d + 1) * T + fixed), "fmm-linear",
                               "use fewer rows or features")
        return kernel_matrix_estimate(n, d, nnz, self.kernel_kind, fixed, "FMM")

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        self._reset_fitted()
        self.history_ = []
        if self.kernel_kind.primal:
            Xa = augment(X) if self.fit_intercept else X
            W = self._run_linear(Xa, Y, callback)
            self.coef_, self.intercept_ = split_linear(W.T, X.shape[1], self.fit_intercept)
        else:
            self.gamma_ = resolve_gamma(self.gamma, X)
            K = self.kernel_.gram(X)
            self._set_kernel_model(self._run_kernel(K, Y, callback), X)

    def _run_linear(self, Xa, Y: np.ndarray, callback: Callback | None) -> np.ndarray:
        n, T = Y.shape
        W = np.zeros((Xa.shape[1], T))
        G = np.zeros_like(W)
        Q = np.full((n, T), 1.0 / n)
        for t in range(self.n_iter):
            rho = t / (t + 1.0)
            grad = np.asarray(Xa.T @ (Y * Q))  # Z^T q = -grad psi(w)
            G = rho * (G - grad)
            W -= self.eta * (G - grad)
            M = Y * np.asarray(Xa @ W)
            Q = _softmax_neg(M)
            if self._report(callback, t + 1, M, np.sqrt(np.einsum("ij,ij->j", W, W))):
                break
        return W

    def _run_kernel(self, K: np.ndarray, Y: np.ndarray, callback: Callback | None) -> np.ndarray:
        n, T = Y.shape
        V = np.zeros((n, T))
        U = np.zeros_like(V)
        Q = np.full((n, T), 1.0 / n)
        for t in range(self.n_iter):
            rho = t / (t + 1.0)
            U = rho * (U - Q)
            V -= self.eta * (U - Q)
            B = Y * V  # the expansion coefficients of f
            KB = K @ B
            M = Y * KB
            Q = _softmax_neg(M)
            norms = np.sqrt(np.maximum(np.einsum("ij,ij->j", B, KB), 0.0))
            if self._report(callback, t + 1, M, norms):
                break
        return Y * V

    def _report(self, callback: Callback | None, k: int, M: np.ndarray,
                norms: np.ndarray) -> bool:
        """Record iteration k; True if the callback asked to stop."""
        self.n_iter_ = k
        ok = norms > 0  # a zero model (X~^T y = 0) has no normalised margin
        normed = M[:, ok] / norms[ok]
        record = {"iteration": k, "max_iter": self.n_iter, "task": 0, "n_tasks": 1,
                  "min_margin": float(np.min(normed)) if normed.size else None,
                  "theta": float(np.mean(normed)) if normed.size else None}
        self.history_.append(record)
        return self._stop_requested(callback, record)
