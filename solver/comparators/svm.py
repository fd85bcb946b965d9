"""Soft-margin SVM (msvmav.md section 2): LIBLINEAR for the linear kernel, LIBSVM otherwise,
both through scikit-learn, with the fitted model copied into plain arrays."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import sparse
from sklearn import svm as sk_svm
from sklearn.utils._param_validation import Interval, StrOptions

from .._base import Callback, FitStopped, report
from ..kernels import resolve_gamma
from ._common import KERNEL_CONSTRAINTS, ExpansionClassifier, int32_csr


class SVM(ExpansionClassifier):
    """Support vector machine; bias as in msvmav.md section 8.

    Linear kernel: scikit-learn ``LinearSVC`` (LIBLINEAR) with ``fit_intercept=True,
    intercept_scaling=1``, i.e. LIBLINEAR ``-B 1``: the bias is the weight of a constant-1
    feature and is regularised. Other kernels: ``SVC`` (LIBSVM C-SVC) with a free, unregularised
    bias and an explicit gamma. More than two classes: one binary machine per class
    (one-vs-rest), on the package's +-1 targets.

    Parameters
    ----------
    C : float > 0
        Penalty of the training loss.
    kernel : {"linear", "rbf", "poly", "precomputed"}
    gamma : float > 0 or None
        Kernel width for "rbf"/"poly"; None means 1 / n_features (never scikit-learn's "scale").
    degree, coef0 : polynomial kernel (gamma <x, z> + coef0) ** degree.
    loss : {"squared_hinge", "hinge"}
        Linear kernel only: LIBLINEAR's default L2-loss (``-s 1``/``-s 2``) or the L1-loss
        (``-s 3``). The kernel machine always uses the hinge loss.
    tol : float > 0
        Stopping tolerance passed to LIBLINEAR and to LIBSVM.
    max_iter : int >= 1
        Linear kernel only: LIBLINEAR's iteration cap. LIBSVM runs to its tolerance.
    dual : bool or "auto"
        Linear kernel only, passed to ``LinearSVC`` ("auto": the primal Newton solver when
        n_samples > n_features and the loss allows it, the dual coordinate descent otherwise).
    cache_size : float
        LIBSVM kernel cache in MB.
    random_state : int or None
        Seed of LIBLINEAR's coordinate order (dual solver).

    Attributes
    ----------
    classes_ : (k,) class labels; for two classes classes_[1] is the positive one.
    coef_ : (T, d) and intercept_ : (T,)
        Linear kernel: f(x) = x @ coef_.T + intercept_.
    dual_coef_ : (m,) or (m, T)
        Other kernels: f(x) = k(x, X_fit_) @ dual_coef_ + intercept_, over the union of the
        one-vs-rest machines' support vectors (a zero where a row is not a support vector of
        that machine).
    X_fit_ : (m, d) support vectors (None for "precomputed").
    support_ : (m,) training-row indices of the support vectors (kernels).
    gamma_ : float or None, the gamma actually used.
    n_iter_ : int, LIBLINEAR / LIBSVM iterations (max over the one-vs-rest machines).
    """

    _parameter_constraints: dict = {
        "C": [Interval(Real, 0, None, closed="neither")],
        **KERNEL_CONSTRAINTS,
        "loss": [StrOptions({"squared_hinge", "hinge"})],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "dual": ["boolean", StrOptions({"auto"})],
        "cache_size": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(self, C: float = 1.0, *, kernel: str = "linear", gamma: float | None = None,
                 degree: int = 3, coef0: float = 1.0, loss: str = "squared_hinge",
                 tol: float = 1e-4, max_iter: int = 1000, dual: bool | str = "auto",
                 cache_size: float = 200, random_state: int | None = None) -> None:
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.loss = loss
        self.tol = tol
        self.max_iter = max_iter
        self.dual = dual
        self.cache_size = cache_size
        self.random_state = random_state

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        self._reset_fitted()
        if self.kernel == "linear":
            fit_linear_liblinear(self, X, Y, callback, self._linear_machine)
        else:
            self.gamma_ = resolve_gamma(self.gamma, X.shape[1])
            fit_kernel_libsvm(self, X, Y, callback, self._kernel_machine)

    def _linear_machine(self) -> sk_svm.LinearSVC:
        return sk_svm.LinearSVC(
            C=self.C, loss=self.loss, penalty="l2", dual=self.dual, tol=self.tol,
            max_iter=self.max_iter, fit_intercept=True, intercept_scaling=1.0,
            random_state=self.random_state)

    def _kernel_machine(self) -> sk_svm.SVC:
        return sk_svm.SVC(
            C=self.C, kernel=self.kernel, gamma=self.gamma_, degree=self.degree,
            coef0=self.coef0, tol=self.tol, cache_size=self.cache_size, shrinking=True)


def fit_linear_liblinear(est: ExpansionClassifier, X, Y: np.ndarray,
                         callback: Callback | None, make: Callable[[], Any]) -> None:
    """One LIBLINEAR machine per +-1 target column; copy coef_/intercept_ out of it.

    ``report`` is called after each column so that a callback can cancel between machines
    (LIBLINEAR itself cannot be interrupted)."""
    Xl = int32_csr(X)
    T, d = Y.shape[1], X.shape[1]
    coef, intercept = np.zeros((T, d)), np.zeros(T)
    for t in range(T):
        machine = make().fit(Xl, Y[:, t])
        coef[t] = np.ravel(machine.coef_)
        intercept[t] = np.ravel(machine.intercept_)[0]
        est.n_iter_ = max(est.n_iter_, int(np.max(machine.n_iter_)))
        if _stop(callback, t, T):
            est.stopped_early_ = True
            break
    est.coef_, est.intercept_ = coef, intercept


def fit_kernel_libsvm(est: ExpansionClassifier, X, Y: np.ndarray,
                      callback: Callback | None, make: Callable[[], Any]) -> None:
    """One LIBSVM machine per +-1 target column; store the union of their support vectors.

    scikit-learn's public ``dual_coef_``/``intercept_`` are signed so that a positive value
    means classes_[1] (= +1 here), which is what f(x) = K(x, SV) @ dual_coef + b must give."""
    Xk = X.toarray() if est.kernel == "precomputed" and hasattr(X, "toarray") else X
    T = Y.shape[1]
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    intercept = np.zeros(T)
    for t in range(T):
        machine = make().fit(Xk, Y[:, t])
        dual = machine.dual_coef_  # sparse when LIBSVM was given sparse rows
        parts.append((machine.support_, np.ravel(dual.toarray() if sparse.issparse(dual)
                                                 else dual)))
        intercept[t] = np.ravel(machine.intercept_)[0]
        est.n_iter_ = max(est.n_iter_, int(np.max(machine.n_iter_)))
        if _stop(callback, t, T):
            est.stopped_early_ = True
            break
    support = np.unique(np.concatenate([s for s, _ in parts]))
    A = np.zeros((support.size, T))
    for t, (s, a) in enumerate(parts):
        A[np.searchsorted(support, s), t] = a
    est._set_kernel_model(A, X, intercept, support)


def _stop(callback: Callback | None, t: int, T: int) -> bool:
    """Report one finished machine; True if the callback asked to stop."""
    try:
        report(callback, {"iteration": 1, "max_iter": 1, "task": t, "n_tasks": T})
    except FitStopped:
        return True
    return False
