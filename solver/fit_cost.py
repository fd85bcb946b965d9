"""What an MSVMAv fit costs in time, before and while it runs: the cost model that kernel
``approximation="auto"`` chooses its path by and that the service's ``/train`` estimate uses.

Each path's time is a sum of work terms, each a count of floating-point work times a
calibrated number of seconds per unit (``bench/fit_cost.py`` measures them; the constants
below are its figures on a 2-core AMD EPYC shared with other work, so they are an upper
estimate on an idle machine):

* exact kernel: the Gram matrix (n^2 d), the inverse of I + K (n^3: Cholesky n^3 / 3 and the
  inverse from it 2 n^3 / 3) and the iterations (n^2 each: the matrix-vector products, and a
  fixed KERNEL_STEP_OVERHEAD each on every kernel path); memory about four n x n arrays;
* low-rank (randomly pivoted Cholesky to rank r): the pivots (n r (d + r): kernel columns and
  the residual update), the eigendecomposition of the r x r Gram matrix of the factor (r^3)
  and the iterations (n r each; above DENSE_MAX_DIM the step's system is solved by conjugate
  gradients, CG_FACTOR times dearer); memory n r;
* Nystroem at m landmarks: the low-rank terms at r = m (its kernel columns n m d, the
  landmarks' m x m inverse root m^3, the transform n m^2);
* linear: the iterations over the stored values (n D for dense rows).

``RankChooser`` is the stop rule ``approximation="auto"`` gives ``low_rank.pivoted_cholesky``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ._linear_step import DENSE_MAX_DIM
from .low_rank import PivotStep

# Seconds per unit of work (bench/fit_cost.py on this project's 2-core AMD EPYC, busy).
GRAM = 1.5e-10  # per n^2 d: scikit-learn's rbf_kernel
INVERSE = 2.5e-11  # per n^3: LAPACK potrf + potri (or the blocked sweep) on two threads
EXACT_STEP = 6e-10  # per n^2 and iteration of the exact kernel path
PIVOT = 5e-10  # per n r (d + r) of the pivoted Cholesky
FEATURE_STEP = 1.7e-9  # per n r and iteration of the low-rank / Nystroem path
CG_FACTOR = 2.5  # the low-rank step by conjugate gradients (rank > DENSE_MAX_DIM)
EIGH = 5e-10  # per r^3
LINEAR_STEP = 2e-9  # per stored value and iteration of the linear path
# Per iteration and task of a kernel path, whatever n: the iteration's Python (the proximal
# step, the active set's bookkeeping, the stop rule). Measured on whole exact-RBF fits (as
# tests/solver/test_fit_time_tracks.py times them): at n = 200 it is 3/4 of the fit, which the
# terms above put at 1/30 of what it took (a search of 81 such cells: 1/48).
KERNEL_STEP_OVERHEAD = 9e-5
# The iterations a fit is costed at: the paper's T = 100 is usually reached.
# The residual's spectral norm (its largest-gain estimate) at which a fixed-rank factor is
# accurate enough for the kernel step: I + L L^T is then within a factor 1 + METRIC_TOL of
# I + K in every direction (0 <= K - L L^T <= METRIC_TOL I).
METRIC_TOL = 0.5
# The rank auto may always pivot to in pursuit of kernel_tol (magic needs 179, the 4k-200k
# make_classification shapes of docs/performance.md 110-306 at kernel_tol 1e-6 to 1e-8).
MIN_BUDGET_RANK = 256


def exact_kernel_seconds(n: int, d: int, max_iter: int, n_tasks: int = 1) -> float:
    """Predicted time of an exact-kernel fit on n rows of d features."""
    n, d = float(n), float(d)
    return (GRAM * n * n * d + INVERSE * n**3
            + (EXACT_STEP * n * n + KERNEL_STEP_OVERHEAD) * max_iter * n_tasks)


def exact_iterations_seconds(n: int, max_iter: int, n_tasks: int = 1) -> float:
    """The iterations alone of an exact-kernel fit on n rows (its Gram matrix and inverse
    given: a search's configurations of one fold and gamma share them)."""
    return (EXACT_STEP * float(n) * n + KERNEL_STEP_OVERHEAD) * max_iter * n_tasks


def low_rank_seconds(n: int, d: int, rank: int, max_iter: int, n_tasks: int = 1) -> float:
    """Predicted time of a low-rank fit that pivots to ``rank`` (also Nystroem at ``rank``
    landmarks: the same terms)."""
    n, d, r = float(n), float(d), float(rank)
    step = FEATURE_STEP * (CG_FACTOR if rank > DENSE_MAX_DIM else 1.0)
    return (PIVOT * n * r * (d + r) + EIGH * r**3
            + (step * n * r + KERNEL_STEP_OVERHEAD) * max_iter * n_tasks)


def linear_seconds(n: int, D: int, stored: int | None, max_iter: int,  # noqa: N803
                   n_tasks: int = 1) -> float:
    """Predicted time of a linear fit on n rows of D columns (``stored`` values; None: dense)."""
    values = float(n) * D if stored is None else float(stored)
    return LINEAR_STEP * values * max_iter * n_tasks


def budget_rank(n: int, d: int) -> int:
    """The largest rank r whose pivots' work n r (d + r) stays within one pass over the n x n
    kernel matrix (n^2 d): past it, meeting kernel_tol by pivoting costs more than any method
    that reads the whole kernel once. At least MIN_BUDGET_RANK: below that rank the whole
    low-rank fit costs little whatever n (and small n have the exact kernel to compare with)."""
    return max(MIN_BUDGET_RANK, int((-d + math.sqrt(d * d + 4.0 * n * d)) / 2))


@dataclass
class RankChooser:
    """The stop rule of ``approximation="auto"``, called after each block of pivots.

    It extrapolates the rank r_tol at which the trace error would meet ``tol`` (log-linear in
    the rank over the last doubling of it) and keeps pivoting while r_tol is affordable
    (at most ``budget_rank``): fast-decaying spectra end at ``tol`` as before. Once it is not,
    ``tol`` is out of reach at a reasonable cost and the factor is kept at the first rank whose
    largest-gain estimate of the residual's spectral norm is at most ``metric_tol`` (the kernel
    step's metric I + K is then matched within that factor); if that is not reached before the
    pivots have cost as much as the exact kernel, the exact kernel is taken when it fits
    (``decision == "exact"``). ``decision`` is None while pivoting goes on, else "tol",
    "fixed_rank" or "exact"; ``reason`` says why in words."""

    n: int
    d: int
    tol: float
    max_iter: int
    n_tasks: int = 1
    exact_fits: bool = True
    metric_tol: float = METRIC_TOL
    decision: str | None = None
    reason: str = ""
    steps: list[PivotStep] = field(default_factory=list)

    @property
    def exact_seconds(self) -> float:
        if not self.exact_fits:
            return math.inf
        return exact_kernel_seconds(self.n, self.d, self.max_iter, self.n_tasks)

    def seconds(self, rank: int) -> float:
        return low_rank_seconds(self.n, self.d, rank, self.max_iter, self.n_tasks)

    def rank_for_tol(self, step: PivotStep) -> float:
        """Extrapolated rank at which the trace error meets ``tol`` (inf if it stalls)."""
        if step.error <= self.tol:
            return float(step.rank)
        half = [s for s in self.steps[:-1] if s.rank <= step.rank / 2]
        # before any: rank 0, where the trace error is 1
        ref = half[-1] if half else PivotStep(0, 1.0, math.inf)
        if ref.rank >= step.rank or ref.error <= step.error:
            return math.inf
        rate = math.log(ref.error / step.error) / (step.rank - ref.rank)
        return step.rank + math.log(step.error / self.tol) / rate

    def __call__(self, step: PivotStep) -> bool:
        self.steps.append(step)
        if step.error <= self.tol:
            return False  # the factorisation ends by itself: the "tol" outcome
        r_tol = self.rank_for_tol(step)
        limit = budget_rank(self.n, self.d)
        if r_tol <= limit and self.seconds(math.ceil(r_tol)) <= self.exact_seconds:
            return False
        if step.gain <= self.metric_tol:
            self.decision = "fixed_rank"
            self.reason = (
                f"trace error {step.error:.3g} at rank {step.rank} decays too slowly to meet "
                f"kernel_tol {self.tol:g} within rank {limit} (extrapolated rank "
                f"{_rank_text(r_tol)}); kept rank {step.rank}, whose residual's spectral-norm "
                f"estimate {step.gain:.3g} <= {self.metric_tol:g} (the kernel step's I + K "
                f"matched within that factor); predicted {self.seconds(step.rank):.3g} s, "
                f"exact {_seconds_text(self.exact_seconds)}")
            return True
        if self.seconds(step.rank) >= self.exact_seconds:
            self.decision = "exact"
            self.reason = (
                f"rank {step.rank} (trace error {step.error:.3g}, residual spectral-norm "
                f"estimate {step.gain:.3g} > {self.metric_tol:g}) already costs as much as the "
                f"exact kernel (predicted {self.exact_seconds:.3g} s): took the exact kernel")
            return True
        return False

    def finish(self, rank: int, error: float) -> None:
        """Record the outcome of a factorisation that ended by itself (tol or a cap)."""
        if self.decision is None:
            self.decision = "tol" if error <= self.tol else "capped"
            self.reason = (f"trace error {error:.3g} <= kernel_tol {self.tol:g} at rank {rank}"
                           if error <= self.tol else
                           f"rank {rank} reached the memory cap with trace error {error:.3g}")


def _rank_text(rank: float) -> str:
    return "never (stalled)" if math.isinf(rank) else f"{rank:.0f}"


def _seconds_text(seconds: float) -> str:
    return "does not fit kernel_memory_mb" if math.isinf(seconds) else f"{seconds:.3g} s"
