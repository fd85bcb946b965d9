"""A fitted model as one of two plain expansions (what every estimator of the package is):

* primal (the linear kernel): f(x) = x @ weights + intercept          weights (d, T)
* kernel:                     f(x) = k(x, centres) @ weights + intercept
                                                       centres (m, d), weights (m, T)

T = 1 for two classes and T = k (one-vs-rest) otherwise; k is the model's ``kernel_``
(``solver.kernels``), whose ``formula`` an emitter (the service's ONNX export) writes out.
``MarginClassifier.expansion()`` reads it from the estimator's fitted attributes; a model of a
precomputed kernel has none (it keeps no feature rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels import Kernel, NumpyOps


class NoExpansionError(ValueError):
    """The model is not an expansion over feature rows (a precomputed kernel's)."""


@dataclass(frozen=True)
class Expansion:
    classes: np.ndarray  # (k,)
    kernel: Kernel
    weights: np.ndarray  # (d, T) primal; (m, T) kernel
    intercept: np.ndarray  # (T,)
    centres: np.ndarray | None = None  # (m, d) kernel

    @property
    def n_tasks(self) -> int:
        return int(self.weights.shape[1])

    def decision(self, X: np.ndarray) -> np.ndarray:
        """(n, T) decision values of rows X (n, d), from the kernel's formula in numpy (not
        through the estimator's own decision path, which it can so be checked against)."""
        X = np.asarray(X, dtype=np.float64)
        if self.kernel.primal:
            return X @ self.weights + self.intercept
        return self.kernel.formula(NumpyOps(X, self.centres)) @ self.weights + self.intercept


def as_tasks(a) -> np.ndarray:
    """An (m,) or (m, T) array as (m, T) float64."""
    a = np.asarray(a, dtype=np.float64)
    return a[:, None] if a.ndim == 1 else a
