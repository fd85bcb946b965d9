"""What SVM and SVR share: one scikit-learn LIBLINEAR (linear kernel) or LIBSVM (other kernels)
machine per +-1 target column, copied out into the comparators' plain-array expansion."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import sparse

from solver.params import Interval, StrOptions

from .._base import Callback, WeightedFit
from .._footprint import FitEstimate, copy_bytes, dense_rows_bytes, labels_bytes, n_targets
from ..kernels import Precomputed, resolve_gamma
from ..sparse import int32_csr
from ..weights import CLASS_WEIGHTS
from ._common import ExpansionClassifier

LIBRARY_CONSTRAINTS: dict[str, list] = {
    "tol": [Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "dual": ["boolean", StrOptions({"auto"})],
    "cache_size": [Interval(Real, 0, None, closed="neither")],
    "random_state": ["random_state"],
    "class_weight": [None, StrOptions(set(CLASS_WEIGHTS)), dict],
}


class LibraryClassifier(WeightedFit, ExpansionClassifier):
    """Base of the library wrappers. Subclasses build the unfitted scikit-learn machines in
    ``_linear_machine()`` and ``_kernel_machine()`` (the latter may use ``gamma_``).

    Weights: ``fit(..., sample_weight)`` and ``class_weight`` (``solver.weights``) give each
    row a weight, passed to every machine's ``fit(X, y, sample_weight)``: LIBLINEAR and LIBSVM
    scale the row's C by it (for two classes, what their own ``class_weight`` does)."""

    def __init__(self, C: float, *, kernel: str, gamma: float | str | None, degree: int,
                 coef0: float, loss: str, tol: float, max_iter: int, dual: bool | str,
                 cache_size: float, random_state: int | None,
                 calibration: str = "none", class_weight: str | dict | None = None) -> None:
        # the subclasses' parameters they share, stored as given (scikit-learn's convention)
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
        self.calibration = calibration
        self.class_weight = class_weight

    def _linear_machine(self) -> Any:
        raise NotImplementedError

    def _kernel_machine(self) -> Any:
        raise NotImplementedError

    def _check_kernel_params(self) -> None:
        """Reject parameters the kernel machine does not support (called before it is built)."""

    def fit_estimate(self, n_samples: int, n_features: int, nnz: int | None,
                     n_classes: int = 2) -> FitEstimate:
        n, d = n_samples, n_features
        stored = n * d if nnz is None else nnz
        fixed = labels_bytes(n, n_classes) + 8 * n_targets(n_classes) * (d + 1)
        if self.kernel_kind.primal:
            # LIBLINEAR's copy of the rows (16-byte nodes, a bias node and a terminator per
            # row) and its dual variables
            peak = 16 * (stored + 2 * n) + 24 * n + fixed
            return FitEstimate(int(peak), "liblinear", "use fewer rows or features")
        # LIBSVM: its kernel cache, its copy of CSR rows, and the support vectors copied out
        # twice (the library's and the model's dense rows; at most every row)
        rows = dense_rows_bytes(n, d) if self.kernel_kind.on_features else 0
        sparse_copy = 0 if nnz is None else 16 * (nnz + n)
        cache = min(self.cache_size * 2**20, 4 * n * n)  # float kernel columns, as needed
        peak = cache + sparse_copy + rows + copy_bytes(n, d, nnz) + fixed
        return FitEstimate(int(peak), "libsvm",
                           "use fewer rows or features, a smaller cache_size, or MSVMAv with "
                           "approximation='auto'")

    def _fit_targets(self, X, Y: np.ndarray, callback: Callback | None,
                     weights: np.ndarray | None = None) -> None:
        self._reset_fitted()
        self._weights = weights  # the machines' sample_weight during this fit
        try:
            if self.kernel_kind.primal:
                self._fit_linear(X, Y, callback)
            else:
                self._check_kernel_params()
                self.gamma_ = resolve_gamma(self.gamma, X)
                self._fit_kernel(X, Y, callback)
        finally:
            del self._weights

    def _fitted_machines(self, X, Y: np.ndarray, callback: Callback | None,
                         make: Callable[[], Any]) -> Iterator[tuple[int, Any]]:
        """Yield (t, machine fitted on column t), keeping ``n_iter_`` as the max over machines.

        The callback is told after each machine, so that it can cancel between machines (the
        libraries themselves cannot be interrupted); the remaining columns are then not fitted."""
        T = Y.shape[1]
        for t in range(T):
            machine = make().fit(X, Y[:, t], sample_weight=self._weights)
            self.n_iter_ = max(self.n_iter_, int(np.max(machine.n_iter_)))
            yield t, machine
            if self._stop_requested(callback, {"iteration": 1, "max_iter": 1, "task": t,
                                               "n_tasks": T}):
                return

    def _fit_linear(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        """One LIBLINEAR machine per target column; copy coef_/intercept_ out of it."""
        T, d = Y.shape[1], X.shape[1]
        coef, intercept = np.zeros((T, d)), np.zeros(T)
        for t, machine in self._fitted_machines(int32_csr(X), Y, callback, self._linear_machine):
            coef[t] = np.ravel(machine.coef_)
            intercept[t] = np.ravel(machine.intercept_)[0]
        self.coef_, self.intercept_ = coef, intercept

    def _fit_kernel(self, X, Y: np.ndarray, callback: Callback | None) -> None:
        """One LIBSVM machine per target column; store the union of their support vectors.

        scikit-learn's public ``dual_coef_``/``intercept_`` are signed so that a positive value
        means classes_[1] (= +1 here), which is what f(x) = K(x, SV) @ dual_coef + b must give."""
        Xk = X if self.kernel_kind.on_features else Precomputed().matrix(X, None)
        T = Y.shape[1]
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        intercept = np.zeros(T)
        for t, machine in self._fitted_machines(Xk, Y, callback, self._kernel_machine):
            dual = machine.dual_coef_  # sparse when LIBSVM was given sparse rows
            parts.append((machine.support_, np.ravel(dual.toarray() if sparse.issparse(dual)
                                                     else dual)))
            intercept[t] = np.ravel(machine.intercept_)[0]
        support = np.unique(np.concatenate([s for s, _ in parts]))
        A = np.zeros((support.size, T))
        for t, (s, a) in enumerate(parts):
            A[np.searchsorted(support, s), t] = a
        self._set_kernel_model(A, X, intercept, support)
