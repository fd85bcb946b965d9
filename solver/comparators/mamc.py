"""Maximal average margin classifier (docs/algorithm.md, "MAMC"): closed form, no
hyper-parameter."""

from __future__ import annotations

import math

import numpy as np

from solver.params import StrOptions

from .._base import Callback
from .._footprint import (
    FLOAT,
    FitEstimate,
    augmented_copy_bytes,
    dense_rows_bytes,
    labels_bytes,
    n_targets,
)
from ..kernels import resolve_gamma
from ..msvmav import augment
from ._common import KERNEL_CONSTRAINTS, ExpansionClassifier, split_linear

# Rows of the kernel matrix formed at a time for y^T K y (kernel MAMC never holds n x n).
KERNEL_BLOCK = 2048


class MAMC(ExpansionClassifier):
    """max_{||w|| = 1} (1/n) sum_i y_i <w, phi(x_i)>, solved by w = sum_i y_i phi(x_i) / norm.

    Linear, bias="augment" (the paper's protocol): w~ = (X~^T y) / ||X~^T y|| over the features
    with a constant 1 appended, so the bias is proportional to n_+ - n_- and lies inside the unit
    norm. This equals MSVMAv's initial point w0. bias="none": the same without the constant
    feature (bias 0). Kernels (no bias, Parzen window): f(x) = sum_i a_i k(x_i, x) with
    a = y / sqrt(y^T K y), MSVMAv's kernel initial point. One-vs-rest for more than two classes.

    Parameters
    ----------
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0, "scale" (default), "auto" or None
        Kernel width for "rbf"/"poly", as scikit-learn's SVC: "scale" 1 / (d Var(X)), "auto"
        (and None, the default before "scale") 1 / d.
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    bias : {"augment", "none"}
        Linear kernel only (kernels never have a bias).

    Attributes
    ----------
    classes_ : (k,) class labels; for two classes classes_[1] is the positive one.
    coef_ : (T, d) and intercept_ : (T,)
        Linear kernel: f(x) = x @ coef_.T + intercept_, with ||(coef_[t], intercept_[t])|| = 1.
    dual_coef_ : (n,) or (n, T)
        Kernels: f(x) = k(x, X_fit_) @ dual_coef_, with dual_coef_^T K dual_coef_ = 1.
    X_fit_ : (n, d) training rows (None for "precomputed").
    gamma_ : float or None, the gamma actually used.
    n_iter_ : int, always 0 (closed form).
    """

    _parameter_constraints: dict = {
        **KERNEL_CONSTRAINTS,
        "bias": [StrOptions({"augment", "none"})],
    }

    def __init__(self, *, kernel: str = "linear", gamma: float | str | None = "scale",
                 degree: int = 3,
                 coef0: float = 1.0, bias: str = "augment",
                 calibration: str = "none") -> None:
        self.calibration = calibration
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.bias = bias

    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        n, d = n_samples, n_features
        fixed = labels_bytes(n, n_classes) + FLOAT * n * n_targets(n_classes)
        if self.kernel_kind.primal:
            copy = augmented_copy_bytes(n, d, nnz) if self.bias == "augment" else 0
            return FitEstimate(int(copy + 2 * FLOAT * (d + 1) * n_targets(n_classes) + fixed),
                               "mamc-linear", "use fewer rows or features")
        rows = dense_rows_bytes(n, d) if self.kernel_kind.on_features else 0
        block = FLOAT * min(KERNEL_BLOCK, n) * n
        return FitEstimate(int(block + rows + fixed), "mamc-kernel",
                           "use fewer rows (the model keeps every training row)")

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        self._reset_fitted()
        if self.kernel_kind.primal:
            self._fit_linear(X, Y)
        else:
            self.gamma_ = resolve_gamma(self.gamma, X)
            self._fit_kernel(X, Y)

    def _fit_linear(self, X, Y: np.ndarray) -> None:
        has_bias = self.bias == "augment"
        Xa = augment(X) if has_bias else X
        W = np.zeros((Y.shape[1], Xa.shape[1]))
        for t in range(Y.shape[1]):
            # computed exactly as MSVMAv computes w0, so that the two agree to the last bit
            s = np.asarray(Xa.T @ Y[:, t]).ravel()
            nrm = math.sqrt(float(s @ s))
            if not nrm > 0:
                raise ValueError("X, y: the signed class sum X^T y is zero, so the average-margin "
                                 "direction is undefined (perfectly balanced, symmetric data)")
            W[t] = s / nrm
        self.coef_, self.intercept_ = split_linear(W, X.shape[1], has_bias)

    def _fit_kernel(self, X, Y: np.ndarray) -> None:
        n = X.shape[0]
        KY = np.empty_like(Y)
        if not self.kernel_kind.on_features:
            KY[:] = np.asarray(X @ Y)
        else:
            kernel = self.kernel_
            for start in range(0, n, KERNEL_BLOCK):
                rows = slice(start, min(start + KERNEL_BLOCK, n))
                KY[rows] = kernel.matrix(X[rows], X) @ Y
        sq = np.einsum("ij,ij->j", Y, KY)  # y^T K y per target
        if not np.all(sq > 1e-300):
            raise ValueError("kernel: y^T K y is zero; the kernel matrix is numerically constant "
                             "(increase gamma or rescale the features)")
        self._set_kernel_model(Y / np.sqrt(sq), X)
