"""Every model the service trains, as one of two plain expansions over scaled features:

* linear:  f(x) = x @ weights + intercept                       weights (D, T)
* kernel:  f(x) = k(x, centres) @ weights + intercept            centres (m, D), weights (m, T)

with k(x, z) = exp(-gamma ||x - z||^2) (rbf) or (gamma <x, z> + coef0)^degree (poly), T = 1 for
two classes and T = k (one-vs-rest) otherwise. It is read from the estimators' public fitted
attributes (``coef_``, ``intercept_``, ``dual_coef_``, ``X_fit_``, ``gamma_``), which is what
``decision_function`` computes for MSVMAv (linear, exact, low-rank and Nystroem kernels) and for
the comparators; ``expansion`` checks that on sample rows before anything is exported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

# Relative agreement the expansion must reach with the estimator's own decision_function.
CHECK_RTOL = 1e-9
CHECK_ROWS = 16


class UnsupportedModelError(ValueError):
    """The estimator is not a linear or rbf/poly kernel expansion this module can export."""


@dataclass(frozen=True)
class Expansion:
    classes: np.ndarray  # (k,)
    kernel: str  # "linear", "rbf" or "poly"
    weights: np.ndarray  # (D, T) linear; (m, T) kernels
    intercept: np.ndarray  # (T,)
    centres: np.ndarray | None = None  # (m, D) kernels
    gamma: float = 0.0
    degree: int = 3
    coef0: float = 1.0

    @property
    def n_tasks(self) -> int:
        return int(self.weights.shape[1])

    def decision(self, X: np.ndarray) -> np.ndarray:
        """(n, T) decision values of scaled rows X (n, D), independently of the solver."""
        if self.kernel == "linear":
            return X @ self.weights + self.intercept
        if self.kernel == "rbf":
            K = rbf_kernel(X, self.centres, gamma=self.gamma)
        else:
            K = polynomial_kernel(
                X, self.centres, degree=self.degree, gamma=self.gamma, coef0=self.coef0
            )
        return K @ self.weights + self.intercept


def describe(est: Any) -> str:
    """The model kind in words, for error messages: 'MSVMAv (kernel rbf, nystroem)'."""
    kind = getattr(est, "kernel", "?")
    approx = getattr(est, "kernel_approximation_", None)
    return f"{type(est).__name__} (kernel {kind}" + (f", {approx})" if approx else ")")


def _as_tasks(a: Any) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a[:, None] if a.ndim == 1 else a


def _read(est: Any) -> Expansion:
    kernel = getattr(est, "kernel", None)
    classes = np.asarray(est.classes_)
    if kernel == "linear":
        coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
        intercept = getattr(est, "intercept_", None)
        b = np.zeros(coef.shape[0]) if intercept is None else np.asarray(intercept, float)
        return Expansion(classes, "linear", np.ascontiguousarray(coef.T), b.reshape(-1))
    if kernel not in ("rbf", "poly") or getattr(est, "X_fit_", None) is None:
        raise UnsupportedModelError(
            f"{describe(est)} cannot be exported: only linear, rbf and poly models are"
        )
    weights = _as_tasks(est.dual_coef_)
    intercept = getattr(est, "intercept_", None)
    b = np.zeros(weights.shape[1]) if intercept is None else np.asarray(intercept, float)
    return Expansion(
        classes,
        kernel,
        weights,
        np.broadcast_to(b.reshape(-1), (weights.shape[1],)).copy(),
        np.asarray(est.X_fit_, dtype=np.float64),
        float(est.gamma_),
        int(getattr(est, "degree", 3)),
        float(getattr(est, "coef0", 1.0)),
    )


def expansion(est: Any) -> Expansion:
    """The estimator as an Expansion, checked against its own ``decision_function`` on
    sample rows in [0, 1]^D (where scaled rows live); UnsupportedModelError naming the kind when it
    is not one (e.g. a model whose solver adds a term the expansion does not know)."""
    try:
        exp = _read(est)
    except (AttributeError, TypeError) as exc:
        raise UnsupportedModelError(f"{describe(est)} cannot be exported: {exc}") from None
    d = int(est.n_features_in_)
    rng = np.random.default_rng(0)
    X = np.vstack([np.zeros(d), np.ones(d), rng.random((CHECK_ROWS, d))])
    ours = exp.decision(X)
    theirs = _as_tasks(est.decision_function(X))
    scale = max(float(np.abs(theirs).max()), 1e-300)
    if ours.shape != theirs.shape or not np.allclose(
        ours, theirs, rtol=CHECK_RTOL, atol=CHECK_RTOL * scale
    ):
        raise UnsupportedModelError(
            f"{describe(est)} cannot be exported: its decision function is "
            "not the linear or kernel expansion of its fitted attributes"
        )
    return exp
