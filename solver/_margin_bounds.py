"""The margins' summary (theta, A, the semi-variance) for the "gram" and "dense" paths of linear
MSVMAv without a pass over X at every iteration (``_msvmav_core.PrimalSpace``;
docs/algorithm.md, "The iteration").

MSVMAv's iterates move in a nearly fixed low-dimensional subspace: on bench/wide.py's
100k x 2,000 each step lies within 5e-4 (relative) of the span of the two steps before it.
``MarginBounds`` keeps the margins y * (X c) exactly for the last BASIS iterates c whose
margins a pass over X computed. For a new w, the least-squares combination a of those iterates
gives the margins g = y * (F a) (F: their X c) with

    |y_i x_i . w - g_i| <= ||x_i|| ||w - C a||                       (Cauchy-Schwarz)

so row i is below theta for certain when g_i plus that bound is below it, and above when g_i
minus it is not; only the rows in between are computed exactly, from their stored values. A
pass over X is made (and w joins the basis) when more than n / BAND_ROWS rows are uncertain.
theta = s . w / n exactly (s = X^T y, the average-margin shift), and the semi-variance comes
from G_A (``GramSystem.moments`` or ``PrimalSystem.moments``, which read the step's Gram
matrix and change nothing) for the new A:
n sv = sum_A (theta - m_i)^2 = |A| theta^2 - 2 theta s_A . w + w^T G_A w. The set A is the one
a pass would give; theta and sv agree with a pass's to rounding. On bench/wide.py's 100k x 2,000,
9 passes over X instead of 101, and rows worth a third of a pass computed one by one; the fit
takes 0.86x (and under heavier load 0.76x) the time of the same path with a pass each
iteration (bench/linear_step.py, on a loaded 2-core host). On "dense" (800,000 x 29, the
training job's shape), 6 passes instead of 101 and a third of a pass row by row: the fit took
1.0 s instead of 2.0 s (docs/performance.md, "Margins from bounds on the dense path"); below
``_msvmav_core.DENSE_BOUNDS_VALUES`` values of X, "dense" keeps a pass each iteration.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import sparse

from ._footprint import FLOAT
from ._row_blocks import RowBlocks

# (w^T G_M w, s_M . w, G_M w) for a set M and coef w, or None where they would cost a pass
# over X
Moments = Callable[[np.ndarray, np.ndarray], "tuple[float, float, np.ndarray] | None"]
Summary = tuple[float, np.ndarray, float]

# The iterates (with their X c) kept as the basis of the bounds.
BASIS = 3
# A pass over X when more than n / BAND_ROWS rows are uncertain.
BAND_ROWS = 64
# Rounding allowance, relative to the margins' scale, added to every row's bound (the images
# X c, the combination F a and theta are each exact to ~1e-15 of that scale).
SLACK = 1e-10
# Rows squared at a time for their norms: a temporary this small is reused by the allocator
# from chunk to chunk (a 16 MiB one, newly mapped each time, took 70 ms instead of 5 ms on
# 100k x 2,000 in a fresh process).
CHUNK_BYTES = 2**20


def margin_bounds_bytes(n: int, D: int) -> int:
    """The bounds' memory: X c of the basis, the row norms, the margins and masks formed."""
    return FLOAT * ((BASIS + 4) * n + (BASIS + 2) * D)


def below(m: np.ndarray, theta: float) -> tuple[np.ndarray, float]:
    """(the mask of A = {i : m_i < theta}, strict; the semi-variance sum_A (theta - m_i)^2 / n)."""
    dev = theta - m
    mask = dev > 0  # m_i < theta exactly where theta - m_i rounds above zero
    np.maximum(dev, 0.0, out=dev)  # the deviations below theta (zero elsewhere)
    return mask, float(dev @ dev) / m.size


def row_norms(X) -> np.ndarray:
    """||x_i|| for every row of X, CHUNK_BYTES of values at a time."""
    n = X.shape[0]
    out = np.zeros(n)
    if sparse.issparse(X):
        step = max(1, int(CHUNK_BYTES // (FLOAT * max(X.nnz / max(n, 1), 1.0))))
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            filled = lo + np.flatnonzero(np.diff(X.indptr[lo:hi + 1]))  # rows with values
            if filled.size:
                a, b = X.indptr[lo], X.indptr[hi]
                values = X.data[a:b] * X.data[a:b]
                out[filled] = np.add.reduceat(values, X.indptr[filled] - a)
    else:
        step = max(1, CHUNK_BYTES // (FLOAT * max(X.shape[1], 1)))
        for lo in range(0, n, step):
            block = X[lo:lo + step]
            out[lo:lo + step] = np.einsum("ij,ij->i", block, block)
    return np.sqrt(out)


class MarginBounds:
    """theta, A and the semi-variance of the margins y * (X w), with passes over X only when
    the bounds of the module docstring leave too many rows undecided."""

    def __init__(self, X, y: np.ndarray, rows: RowBlocks, shift: np.ndarray) -> None:
        self.X, self.y, self.rows, self.shift = X, y, rows, shift
        self.norms = row_norms(X)
        self.widest = float(self.norms.max(initial=0.0))
        self.basis = np.zeros((0, X.shape[1]))  # the kept iterates c, one a row
        self.margins = np.zeros((0, X.shape[0]))  # their margins y * (X c)
        self.sizes = np.zeros(0)  # their norms
        self.passes = 0
        self.exact_rows = 0  # rows computed one by one

    def summary(self, w: np.ndarray, moments: Moments) -> tuple[Summary, np.ndarray | None]:
        """((theta, the mask of A = {i : m_i < theta}, the semi-variance), G_A w or None) for
        coef w. Where the bounds decide A, ``moments(A, w)`` gives w^T G_A w and s_A . w for sv
        (and G_A w, returned for the caller to hand to the step); where they do not, or
        ``moments`` declines (None: G would have to be built for A), a pass over X."""
        n = self.y.size
        theta = float(self.shift @ w) / n
        mask = self._bounded_mask(w, theta)
        found = None if mask is None else moments(mask, w)
        if found is None:
            # a pass over X: the margins (w joins the basis)
            m = self.y * self.rows.matvec(w)
            self._keep(w, m)
            return (theta, *below(m, theta)), None
        squares, signed, product = found
        count = int(np.count_nonzero(mask))
        sv = (count * theta * theta - 2.0 * theta * signed + squares) / n
        return (theta, mask, max(sv, 0.0)), product

    def _keep(self, w: np.ndarray, margins: np.ndarray) -> None:
        self.basis = np.vstack([self.basis[-(BASIS - 1):], w[None, :]])
        self.margins = np.vstack([self.margins[-(BASIS - 1):], margins[None, :]])
        self.sizes = np.linalg.norm(self.basis, axis=1)
        self.passes += 1

    def _bounded_mask(self, w: np.ndarray, theta: float) -> np.ndarray | None:
        """A from the bounds, the undecided rows computed exactly; None: a pass is due."""
        if self.basis.shape[0] < 2:
            return None
        a = np.linalg.lstsq(self.basis.T, w, rcond=None)[0]
        error = float(np.linalg.norm(w - a @ self.basis))
        gap = a @ self.margins  # the margins' estimates, less theta (next line)
        gap -= theta
        scale = SLACK * (float(np.abs(a) @ self.sizes) + float(np.linalg.norm(w)))
        bound = self.norms * (error + scale)
        bound += scale * self.widest
        band = np.flatnonzero(np.abs(gap) <= bound)
        if band.size * BAND_ROWS > self.y.size:
            return None
        if band.size:
            gap[band] = self.y[band] * np.asarray(self.X[band] @ w).ravel() - theta
            self.exact_rows += band.size
        return gap < 0  # m_i < theta exactly where m_i - theta rounds below zero
