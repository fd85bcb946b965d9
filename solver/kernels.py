"""The kernels every kernel estimator in the package shares, as types.

k_rbf(x, z) = exp(-gamma ||x - z||^2) (LIBSVM's -g; unit diagonal),
k_poly(x, z) = (gamma <x, z> + coef0)^degree, k_linear(x, z) = <x, z>.
"precomputed" means X already holds kernel values: (n, n) at fit, (n_test, n_train) after.

An estimator's ``kernel`` parameter stays the name (scikit-learn's convention); ``kernel_type``
turns a name into its class, whose class attributes say what a fit with it does before any
width is known (``on_features``, ``primal``, ``gram_temporaries``), and ``make_kernel`` into an
instance with its parameters, which computes: ``matrix``, ``gram``, ``diagonal``,
``expansion_gradient``, ``entry_work`` (the cost of one entry) and ``formula`` (the kernel
written in a few elementwise operations, for emitters such as the service's ONNX export).
Nothing outside these classes compares kernel names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np
from scipy import sparse
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel

from ._linalg import symmetrize_from_upper

T = TypeVar("T")

# Products x_i . x_j per block of a Gram matrix computed with a check between blocks.
GRAM_BLOCK_WORK = 2e9
# The named kernel widths (scikit-learn's): "scale" = 1 / (d Var(X)), "auto" = 1 / d.
GAMMA_NAMES = ("scale", "auto")
# Rows per block of the variance of dense X (a block's copy, not X's, is the extra memory).
VARIANCE_BLOCK = 4096


def resolve_gamma(gamma: float | str | None, X) -> float:
    """The kernel width a fit on X (n, d; dense or CSR) uses, as scikit-learn's SVC spells it:
    ``"scale"`` (the default) 1 / (d Var(X)), Var over every entry of X (1.0 when X is
    constant); ``"auto"`` 1 / d, the centre of the paper's grid {2^j / d}; None the same as
    ``"auto"`` (the default before "scale": models and requests saved with it keep their
    width); a number is used as given."""
    d = max(X.shape[1], 1)
    if gamma is None or gamma == "auto":
        return 1.0 / d
    if gamma == "scale":
        var = feature_variance(X)
        return 1.0 / (d * var) if var > 0 else 1.0
    return float(gamma)


def feature_variance(X) -> float:
    """Var(X) over every entry of X (numpy's ``X.var()``, ddof 0), without a copy of X: dense
    rows in blocks of VARIANCE_BLOCK, CSR from its stored values."""
    n, d = X.shape
    size = n * d
    if size == 0:
        return 0.0
    if sparse.issparse(X):
        data = X.data
        mean = float(data.sum()) / size
        # the zeros contribute mean^2 each
        return max(float(np.dot(data - mean, data - mean)) + (size - data.size) * mean**2,
                   0.0) / size
    X = np.asarray(X)
    mean = float(X.sum(dtype=np.float64)) / size
    total = 0.0
    for i in range(0, n, VARIANCE_BLOCK):
        block = X[i:i + VARIANCE_BLOCK] - mean
        total += float(np.einsum("ij,ij->", block, block))
    return total / size



class KernelOps(Protocol[T]):
    """The elementwise operations a kernel's ``formula`` is written in, over (n, m) values
    of rows X against centres Z: numpy's (``NumpyOps``) or a graph builder's."""

    def inner(self) -> T:
        """<x_i, z_j>."""

    def squared_distance(self) -> T:
        """||x_i - z_j||^2, never below 0."""

    def affine(self, a: T, scale: float, shift: float) -> T:
        """scale * a + shift."""

    def exp(self, a: T) -> T:
        """exp(a)."""

    def power(self, a: T, exponent: float) -> T:
        """a ** exponent."""


class NumpyOps(Generic[T]):
    """``KernelOps`` in numpy on dense rows X (n, d) and centres Z (m, d): the formula
    evaluated independently of scikit-learn's pairwise kernels (which ``matrix`` uses)."""

    def __init__(self, X: np.ndarray, Z: np.ndarray) -> None:
        self.X = np.asarray(X, dtype=np.float64)
        self.Z = np.asarray(Z, dtype=np.float64)

    def inner(self) -> np.ndarray:
        return self.X @ self.Z.T

    def squared_distance(self) -> np.ndarray:
        sq = np.einsum("ij,ij->i", self.X, self.X)[:, None]
        zz = np.einsum("ij,ij->i", self.Z, self.Z)[None, :]
        return np.maximum(sq - 2.0 * self.inner() + zz, 0.0)

    def affine(self, a: np.ndarray, scale: float, shift: float) -> np.ndarray:
        return a * scale + shift

    def exp(self, a: np.ndarray) -> np.ndarray:
        return np.exp(a)

    def power(self, a: np.ndarray, exponent: float) -> np.ndarray:
        return a ** exponent


def _dense(X) -> np.ndarray:
    return X.toarray() if sparse.issparse(X) else np.asarray(X, dtype=np.float64)


def _row_squares(X) -> np.ndarray:
    if sparse.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


@dataclass(frozen=True)
class Kernel:
    """A kernel with its parameters. Class attributes (known from the name alone):

    * ``name``: the estimators' ``kernel`` parameter value;
    * ``on_features``: k is computed from feature rows (False: X holds the kernel's values,
      so a model keeps no rows, has no feature means and cannot be explained per feature);
    * ``primal``: the model is a weight vector over the features (``coef_``), not an
      expansion over rows (``dual_coef_``, ``X_fit_``);
    * ``gram_temporaries``: the extra n x n floats per Gram matrix entry its computation
      holds (scikit-learn's RBF and polynomial kernels: half as much again);
    * ``explanation``: how ``solver.explain`` attributes a decision to features, or None;
    * ``takes_gamma``: it has a width (``gamma``, searched over the paper's grid).
    """

    name: ClassVar[str]
    on_features: ClassVar[bool] = True
    takes_gamma: ClassVar[bool] = False
    primal: ClassVar[bool] = False
    gram_temporaries: ClassVar[float] = 0.0
    explanation: ClassVar[str | None] = None

    @classmethod
    def from_params(cls, gamma: float | None, degree: int, coef0: float) -> Kernel:
        """The kernel with a fit's parameters (those it does not take are ignored)."""
        return cls()

    def params(self) -> dict[str, Any]:
        """The parameters the kernel takes, as JSON values."""
        return {}

    def matrix(self, X, Z) -> np.ndarray:
        """Dense C-contiguous float64 K[i, j] = k(X[i], Z[j]), shape (len(X), len(Z))."""
        raise NotImplementedError

    def diagonal(self, X) -> np.ndarray:
        """k(x_i, x_i) for each row, without forming the full matrix."""
        raise NotImplementedError

    def gram(self, X, check: Callable[[int], None] | None = None) -> np.ndarray:
        """Symmetric training Gram matrix, (n, n) float64. With ``check``, computed a block
        of rows at a time (about GRAM_BLOCK_WORK n d products each), ``check(rows done)``
        called after each: an exception it raises stops the computation within a block."""
        K = self.matrix(X, X) if check is None else self._gram_in_blocks(X, check)
        # rounding can leave K[i, j] != K[j, i]; the algorithm assumes exact symmetry
        return symmetrize_from_upper(K)

    def _gram_in_blocks(self, X, check: Callable[[int], None]) -> np.ndarray:
        n, d = X.shape
        K = np.empty((n, n))
        step = max(1, int(GRAM_BLOCK_WORK // max(n * max(d, 1), 1)))
        for i in range(0, n, step):
            K[i:i + step] = self.matrix(X[i:i + step], X)
            check(min(i + step, n))
        return K

    @classmethod
    def entry_work(cls, n_features: int) -> int:
        """Multiply-adds one kernel entry costs on rows of n_features features."""
        return int(n_features)

    def formula(self, ops: KernelOps[T]) -> T:
        """k over rows and centres in ``ops``'s elementwise operations."""
        raise ValueError(f"kernel: a {self.name!r} kernel has no formula over feature rows")

    def expansion_gradient(self, X: np.ndarray, Z: np.ndarray, A: np.ndarray) -> np.ndarray:
        """(n, d, T): the gradient in x of f_t(x) = sum_j A[j, t] k(x, Z[j]) at each row of
        dense X (n, d), for centres Z (m, d) and coefficients A (m, T)."""
        raise ValueError(f"kernel: a {self.name!r} kernel has no gradient in feature rows")


@dataclass(frozen=True)
class Linear(Kernel):
    name: ClassVar[str] = "linear"
    primal: ClassVar[bool] = True
    explanation: ClassVar[str | None] = "linear"

    def matrix(self, X, Z) -> np.ndarray:
        return np.ascontiguousarray(linear_kernel(X, Z), dtype=np.float64)

    def diagonal(self, X) -> np.ndarray:
        return _row_squares(X)

    def formula(self, ops: KernelOps[T]) -> T:
        return ops.inner()

    def expansion_gradient(self, X: np.ndarray, Z: np.ndarray, A: np.ndarray) -> np.ndarray:
        return np.broadcast_to((Z.T @ A)[None, :, :], (X.shape[0], Z.shape[1], A.shape[1]))


@dataclass(frozen=True)
class RBF(Kernel):
    gamma: float
    name: ClassVar[str] = "rbf"
    takes_gamma: ClassVar[bool] = True
    gram_temporaries: ClassVar[float] = 0.5
    explanation: ClassVar[str | None] = "integrated-gradients-rbf"

    @classmethod
    def from_params(cls, gamma: float | None, degree: int, coef0: float) -> Kernel:
        return cls(float(_width(gamma, cls.name)))

    def params(self) -> dict[str, Any]:
        return {"gamma": self.gamma}

    def matrix(self, X, Z) -> np.ndarray:
        return np.ascontiguousarray(rbf_kernel(X, Z, gamma=self.gamma), dtype=np.float64)

    def diagonal(self, X) -> np.ndarray:
        return np.ones(X.shape[0])

    def formula(self, ops: KernelOps[T]) -> T:
        return ops.exp(ops.affine(ops.squared_distance(), -self.gamma, 0.0))

    def expansion_gradient(self, X: np.ndarray, Z: np.ndarray, A: np.ndarray) -> np.ndarray:
        # d/dx k(x, z) = -2 gamma (x - z) k(x, z)
        K = self.matrix(X, Z)
        out = np.empty((X.shape[0], X.shape[1], A.shape[1]))
        for t in range(A.shape[1]):
            KA = K * A[:, t]
            out[:, :, t] = -2.0 * self.gamma * (X * KA.sum(axis=1)[:, None] - KA @ Z)
        return out


@dataclass(frozen=True)
class Poly(Kernel):
    gamma: float
    degree: int = 3
    coef0: float = 1.0
    name: ClassVar[str] = "poly"
    takes_gamma: ClassVar[bool] = True
    gram_temporaries: ClassVar[float] = 0.5
    explanation: ClassVar[str | None] = "integrated-gradients-poly"

    @classmethod
    def from_params(cls, gamma: float | None, degree: int, coef0: float) -> Kernel:
        return cls(float(_width(gamma, cls.name)), int(degree), float(coef0))

    def params(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}

    def matrix(self, X, Z) -> np.ndarray:
        K = polynomial_kernel(X, Z, degree=self.degree, gamma=self.gamma, coef0=self.coef0)
        return np.ascontiguousarray(K, dtype=np.float64)

    def diagonal(self, X) -> np.ndarray:
        return (self.gamma * _row_squares(X) + self.coef0) ** self.degree

    def formula(self, ops: KernelOps[T]) -> T:
        return ops.power(ops.affine(ops.inner(), self.gamma, self.coef0), float(self.degree))

    def expansion_gradient(self, X: np.ndarray, Z: np.ndarray, A: np.ndarray) -> np.ndarray:
        # d/dx k(x, z) = degree gamma (gamma <x, z> + coef0)^(degree - 1) z
        if self.degree == 0:
            return np.zeros((X.shape[0], X.shape[1], A.shape[1]))
        G = self.degree * self.gamma * (self.gamma * (X @ Z.T) + self.coef0) ** (self.degree - 1)
        return np.stack([(G * A[:, t]) @ Z for t in range(A.shape[1])], axis=2)


@dataclass(frozen=True)
class Precomputed(Kernel):
    name: ClassVar[str] = "precomputed"
    on_features: ClassVar[bool] = False

    def matrix(self, X, Z) -> np.ndarray:
        return np.ascontiguousarray(_dense(X), dtype=np.float64)

    def gram(self, X, check: Callable[[int], None] | None = None) -> np.ndarray:
        K = self.matrix(X, X)
        if K.shape[0] != K.shape[1]:
            raise ValueError(f"X: a precomputed kernel must be square at fit, got {K.shape}")
        return symmetrize_from_upper(K.copy())

    def diagonal(self, X) -> np.ndarray:
        raise ValueError("kernel_diagonal: not defined for a precomputed kernel")

    @classmethod
    def entry_work(cls, n_features: int) -> int:
        return 0  # given, not computed


KERNEL_TYPES: dict[str, type[Kernel]] = {k.name: k for k in (Linear, RBF, Poly, Precomputed)}
KERNELS = tuple(KERNEL_TYPES)


def _width(gamma: float | None, name: str) -> float:
    if gamma is None:
        raise ValueError(f"gamma: the {name} kernel needs a width (the fit resolves it)")
    return float(gamma)


def kernel_type(name: str) -> type[Kernel]:
    """The class of the kernel named ``name``; ValueError naming the known ones."""
    try:
        return KERNEL_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"kernel: unknown kernel {name!r}; use one of {KERNELS}") from None


def make_kernel(name: str, *, gamma: float | None = None, degree: int = 3,
                coef0: float = 1.0) -> Kernel:
    """The kernel named ``name`` with these parameters (those it does not take ignored)."""
    return kernel_type(name).from_params(gamma, degree, coef0)


def kernel_matrix(X, Z, *, kernel: str, gamma: float | None, degree: int = 3,
                  coef0: float = 1.0) -> np.ndarray:
    """Dense C-contiguous float64 K[i, j] = k(X[i], Z[j]), shape (len(X), len(Z)):
    ``make_kernel(kernel, ...).matrix(X, Z)``."""
    return make_kernel(kernel, gamma=gamma, degree=degree, coef0=coef0).matrix(X, Z)


def gram_matrix(X, *, kernel: str, gamma: float | None, degree: int = 3, coef0: float = 1.0,
                check: Callable[[int], None] | None = None) -> np.ndarray:
    """Symmetric training Gram matrix, (n, n) float64: ``make_kernel(kernel, ...).gram``."""
    return make_kernel(kernel, gamma=gamma, degree=degree, coef0=coef0).gram(X, check)


def kernel_diagonal(X, *, kernel: str, gamma: float | None, degree: int = 3,
                    coef0: float = 1.0) -> np.ndarray:
    """k(x_i, x_i) for each row, without forming the full matrix."""
    return make_kernel(kernel, gamma=gamma, degree=degree, coef0=coef0).diagonal(X)
