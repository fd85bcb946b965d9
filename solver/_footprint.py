"""What a fit's memory estimate is made of: the estimate itself, the refusal, the limit in force.

Each estimator predicts its own peak (``_fit_estimate``) from the same path-choice functions its
``fit`` uses; ``solver.memory.estimate_fit`` is the public entry point. This module holds only
what every estimator shares, so that none of them imports ``solver.memory`` (which imports them).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .kernels import Kernel

FLOAT = 8  # bytes of a float64
# bytes per stored value of a CSR matrix with int32 indices (value + column index)
CSR_VALUE = 12


@dataclass(frozen=True)
class FitEstimate:
    """Predicted peak extra memory of ``fit()`` beyond the input X, in bytes.

    ``path`` names the computation fit() takes ("dense", "woodbury", "cg", "exact-kernel",
    "low-rank", "nystroem", or a comparator's own); ``advice`` says what to change when the
    estimate is too large."""

    peak_bytes: int
    path: str
    advice: str


class FitTooLarge(ValueError):  # noqa: N818 - the name the service and docs use
    """A fit would need more memory than allowed; raised before anything proportional to it is
    allocated. ``estimate`` is the FitEstimate, ``limit`` the bytes allowed."""

    def __init__(self, estimate: FitEstimate, limit: int, what: str = "fit") -> None:
        self.estimate, self.limit = estimate, limit
        super().__init__(
            f"{what}: the {estimate.path} path needs about {gib(estimate.peak_bytes)} of memory, "
            f"more than the {gib(limit)} allowed; {estimate.advice}")


def gib(n_bytes: float) -> str:
    """A byte count for people: '3.7 GiB', '120 MiB'."""
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.1f} GiB"
    return f"{n_bytes / 2**20:.0f} MiB"


def physical_memory() -> int:
    """The machine's physical memory in bytes (0 if the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 0


_LIMIT: ContextVar[int | None] = ContextVar("fit_memory_limit", default=None)


def fit_memory_limit() -> int:
    """Bytes a fit may use: the value set by ``memory_limit`` or else the physical memory."""
    limit = _LIMIT.get()
    return physical_memory() if limit is None else limit


@contextlib.contextmanager
def memory_limit(n_bytes: int) -> Iterator[None]:
    """Within this context, a fit whose estimate exceeds ``n_bytes`` raises FitTooLarge."""
    token = _LIMIT.set(int(n_bytes))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def csr_bytes(n_rows: int, nnz: int) -> int:
    """A CSR copy: values and int32 column indices, plus the row pointer."""
    return CSR_VALUE * nnz + 8 * (n_rows + 1)


def copy_bytes(n: int, d: int, nnz: int | None) -> int:
    """A copy of an (n, d) input held as given (nnz None: dense)."""
    return FLOAT * n * d if nnz is None else csr_bytes(n, nnz)


def dense_rows_bytes(n: int, d: int) -> int:
    """An (n, d) float64 array (e.g. a kernel model's stored training rows)."""
    return FLOAT * n * d


def n_targets(n_classes: int) -> int:
    """One-vs-rest targets: 1 for two classes, k otherwise."""
    return 1 if n_classes <= 2 else n_classes


# What any fit touches besides its arrays (BLAS work buffers, modules loaded on first use).
BASE_BYTES = 2 * 2**20


def labels_bytes(n: int, n_classes: int) -> int:
    """The validated labels, their class indices and the (n, T) +-1 targets, and BASE_BYTES."""
    return FLOAT * n * (n_targets(n_classes) + 3) + BASE_BYTES


def gram_bytes(n: int, d: int, nnz: int | None, kernel: type[Kernel]) -> int:
    """An n x n Gram matrix as ``kernels.gram_matrix`` forms it: half as much again for the
    RBF/polynomial kernels' temporaries; for CSR rows the sparse product X X^T first, with
    about n^2 min(1, k^2 / d) stored values for k values per row."""
    dense = FLOAT * n * n * (1.0 + kernel.gram_temporaries)
    if nnz is None:
        return int(dense)
    k = nnz / max(n, 1)
    return int(dense + CSR_VALUE * n * n * min(1.0, k * k / max(d, 1)))


def augmented_copy_bytes(n: int, d: int, nnz: int | None) -> int:
    """``msvmav.augment``: a copy of X with a constant column (CSR: and a byte mask per entry)."""
    if nnz is None:
        return FLOAT * n * (d + 1)
    return csr_bytes(n, nnz + n) + nnz + n


def kernel_matrix_estimate(n: int, d: int, nnz: int | None, kernel: type[Kernel], fixed: int,
                           name: str) -> FitEstimate:
    """A comparator that holds the n x n kernel matrix (FMM, ODM): the Gram matrix, a dense copy
    of the rows (not for "precomputed") and ``fixed``; ``name`` is the machine's ("FMM")."""
    rows = dense_rows_bytes(n, d) if kernel.on_features else 0
    return FitEstimate(int(gram_bytes(n, d, nnz, kernel) + rows + fixed),
                       f"{name.lower()}-kernel",
                       f"the kernel {name} holds the n x n kernel matrix: use fewer rows or "
                       "the linear kernel")
