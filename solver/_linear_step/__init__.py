"""How linear MSVMAv solves its semi-variance step: the one home of the linear step.

docs/algorithm.md, "The semi-variance step": w' = w + delta with
(c I + X_A^T X_A) delta = X_A^T e_A, c = n beta, e_i = theta y_i - f_i (i in A). Every way of
solving it is a ``LinearStep`` (the protocol below), named in ``LINEAR_STEPS``, the one
name -> class table that the automatic choice (``choose_linear_solver``), the estimator's
``linear_solver`` parameter and the memory estimate (``linear_system_bytes``) all read; an
unknown name is a ValueError. The ways give the same delta up to rounding:

* "dense" (``dense.PrimalSystem``): keeps X_A^T X_A and its inverse, D x D, updated by
  low-rank edits. Fastest while D is small; memory and refactorisations grow as D^2 and D^3.
* "woodbury" (``row_space.RowSpaceSystem``): the |A|-space form
  delta = X_A^T (c I + X_A X_A^T)^{-1} e_A, from the n x n row Gram matrix X X^T formed once.
  For few rows and many features (n << D).
* "cg" (``conjugate_gradients.ConjugateGradientSystem``): matrix-free preconditioned
  conjugate gradients on v -> c v + X^T (1_A * (X v)). Memory O(n + D) besides X.
* "gram" (``gram.GramSystem``): the same conjugate gradients on v -> c v + G_A v, G_A kept as a
  dense D x D array; one pass over X per outer iteration instead of two per CG iteration. For
  many rows and a few thousand features.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .._row_blocks import RowBlocks
from .conjugate_gradients import CG_MAX_ITER, CG_RTOL, ConjugateGradientSystem, column_sums
from .dense import DENSE_UPDATES, PrimalSystem
from .gram import GRAM_FOLD, GRAM_REBUILD, GramSystem
from .row_space import RowSpaceSystem
from .warm_start import X_REFRESH, WarmStart


class LinearStep(Protocol):
    """What ``_msvmav_core.PrimalSpace`` asks of a linear step.

    ``counters``: named counts of the work done ({what it counts: how many}; each step names
    its own, e.g. "cg_iterations", "inverse_builds"), summed into the fit's ``fit_info_``."""

    counters: dict[str, int]
    advice: str  # what to change when its memory estimate is too large

    def __init__(self, X, y: np.ndarray, base: np.ndarray, *, rows: RowBlocks | None = None,
                 bias: bool = False, update: str = "incremental") -> None:
        """X (n, D) the rows (the intercept's column last with ``bias``), y the +-1 target,
        base the diagonal of the metric (c = n beta, or c (1 + sigma^2) on the low-rank kernel
        path), rows X's products, update how "dense" follows A (the others ignore it)."""

    @staticmethod
    def footprint(n: int, D: int, nnz: int | None) -> int:
        """Peak bytes of its system for n rows, D columns, nnz stored values (None: dense),
        X itself not counted."""

    def set_active(self, mask: np.ndarray) -> None:
        """Make A = {i : mask_i} the active set of the next steps."""

    def step(self, w: np.ndarray, theta: float, f: np.ndarray | None,
             gram_w: np.ndarray | None = None) -> np.ndarray:
        """delta for the iterate w, its margins' mean theta and its decisions f = X w (None
        where the space summarises the margins without them); ``gram_w``: X_A^T X_A w where
        the caller already has it for this A (the "gram" step then skips that product; the
        others ignore it)."""

    def followed(self) -> np.ndarray | None:
        """X delta of the last step where the step followed it (the space then updates f
        without a pass over X), else None."""


# The name -> class table: the names of ``MSVMAv(linear_solver=...)`` besides "auto".
LINEAR_STEPS: dict[str, type[LinearStep]] = {
    "dense": PrimalSystem,
    "woodbury": RowSpaceSystem,
    "cg": ConjugateGradientSystem,
    "gram": GramSystem,
}
LINEAR_SOLVERS = tuple(LINEAR_STEPS)
# "auto": the dense D x D system up to this dimension (D = features + 1 with the intercept).
DENSE_MAX_DIM = 512
# "auto": the kept Gram matrix ("gram") above DENSE_MAX_DIM up to this dimension (8 D^2 bytes:
# 128 MiB at 4096), where X holds at least D^2 / GRAM_MIN_FILL values: a product with the
# symmetric D x D matrix (reading D^2 / 2 of its values) then costs at most one pass over X,
# and a CG iteration on X makes two.
GRAM_MAX_DIM = 4096
GRAM_MIN_FILL = 4
# "auto": the |A|-space form while the training rows are at most this many and fewer than D.
WOODBURY_MAX_ROWS = 256


def linear_step_class(name: str) -> type[LinearStep]:
    """The class of the linear step ``name``; ValueError for a name not in LINEAR_STEPS."""
    try:
        return LINEAR_STEPS[name]
    except KeyError:
        raise ValueError(f"linear_solver: unknown linear step {name!r}; one of "
                         f"{', '.join(LINEAR_SOLVERS)}") from None


def choose_linear_solver(requested: str, n: int, D: int, nnz: int | None = None) -> str:
    """The linear step's name for n training rows and D columns (intercept included) holding
    nnz stored values (None: dense, n D): ``requested`` itself unless it is "auto"."""
    if requested != "auto":
        linear_step_class(requested)
        return requested
    if D <= DENSE_MAX_DIM:
        return "dense"
    if n <= WOODBURY_MAX_ROWS and n < D:
        return "woodbury"
    stored = n * D if nnz is None else nnz
    if D <= GRAM_MAX_DIM and stored * GRAM_MIN_FILL >= D * D:
        return "gram"
    return "cg"


def linear_system_bytes(name: str, n: int, D: int, nnz: int | None) -> int:
    """Peak bytes of one task's step system on the linear step ``name`` (X itself not
    counted)."""
    return linear_step_class(name).footprint(n, D, nnz)


def make_linear_step(name: str, X, y: np.ndarray, base: np.ndarray, *,
                     rows: RowBlocks | None = None, bias: bool = False,
                     update: str = "incremental") -> LinearStep:
    """The linear step ``name`` for rows X, target y and metric diagonal ``base``."""
    return linear_step_class(name)(X, y, base, rows=rows, bias=bias, update=update)


__all__ = ["CG_MAX_ITER", "CG_RTOL", "DENSE_MAX_DIM", "DENSE_UPDATES", "GRAM_FOLD",
           "GRAM_MAX_DIM", "GRAM_MIN_FILL", "GRAM_REBUILD", "LINEAR_SOLVERS", "LINEAR_STEPS",
           "WOODBURY_MAX_ROWS", "X_REFRESH", "ConjugateGradientSystem", "GramSystem",
           "LinearStep", "PrimalSystem", "RowSpaceSystem", "WarmStart", "choose_linear_solver",
           "column_sums", "linear_step_class", "linear_system_bytes", "make_linear_step"]
