"""Kernel approximation="auto" with a cost model (issue 30 point 1): the rank chooser's
decisions on kernels whose spectrum is constructed (a linear kernel on rows Q diag(sqrt(lam)),
so K = Q diag(lam) Q^T exactly), the reason it records, and the model it leads to against an
independent computation."""

import math

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from solver import MSVMAv
from solver.fit_cost import (
    KERNEL_STEP_OVERHEAD,
    METRIC_TOL,
    RankChooser,
    budget_rank,
    exact_kernel_seconds,
    low_rank_seconds,
)
from solver.low_rank import PivotStep, pivoted_cholesky

N = 1200
# the cost model sees a 10-feature kernel with this spectrum (the rows here have N columns)
D = 10


def rows_with_spectrum(lam: np.ndarray, seed: int = 0) -> np.ndarray:
    """Rows X (n, n) whose linear kernel X X^T has eigenvalues ``lam``."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(lam.size, lam.size)))
    return Q * np.sqrt(lam)


def factor(X, chooser, tol=1e-6, max_rank=None):
    return pivoted_cholesky(X, kernel="linear", gamma=1.0, tol=tol, max_rank=max_rank,
                            random_state=0, stop=chooser)


def test_slow_decay_stops_early_at_a_rank_that_matches_the_kernel_step_metric():
    """lam_k = 1000 k^-1.5: the trace error decays as r^-0.5, so kernel_tol 1e-6 would need
    ~1e11 pivots. The chooser stops far below n at the first block whose largest gain (a lower
    estimate of the residual's spectral norm) is <= METRIC_TOL, and says so."""
    lam = 1000.0 * np.arange(1, N + 1) ** -1.5
    X = rows_with_spectrum(lam)
    chooser = RankChooser(N, D, 1e-6, max_iter=100)
    f = factor(X, chooser)
    chooser.finish(f.rank, f.error)
    assert chooser.decision == "fixed_rank"
    assert f.rank < N / 3 and f.error > 1e-3
    assert chooser.steps[-1].gain <= METRIC_TOL < chooser.steps[-2].gain
    # the residual computed independently: its spectral norm is of the order of the estimate
    E = X @ X.T - f.factor.T @ f.factor
    top = float(np.linalg.eigvalsh(E)[-1])
    assert chooser.steps[-1].gain <= top + 1e-9 and top <= 4 * METRIC_TOL
    assert math.isclose(f.error, np.trace(E) / lam.sum(), rel_tol=1e-6)
    assert f"kept rank {f.rank}" in chooser.reason and "kernel_tol 1e-06" in chooser.reason


def test_fast_decay_meets_the_tolerance_with_the_same_factor_as_without_the_chooser():
    """lam_k = 10^(-k / 8): the tolerance is met at a low rank, exactly as before."""
    lam = N * 10.0 ** (-np.arange(N) / 8.0)
    X = rows_with_spectrum(lam)
    chooser = RankChooser(N, D, 1e-6, max_iter=100)
    f = factor(X, chooser)
    chooser.finish(f.rank, f.error)
    plain = factor(X, None)
    assert chooser.decision == "tol" and f.error <= 1e-6 and f.rank < 100
    assert np.array_equal(f.pivots, plain.pivots) and np.array_equal(f.factor, plain.factor)
    assert chooser.reason == f"trace error {f.error:.3g} <= kernel_tol 1e-06 at rank {f.rank}"


def test_a_flat_spectrum_goes_exact_when_it_fits_and_is_capped_when_it_does_not():
    """lam_k = 1: every direction matters as much as the identity of I + K, no fixed rank
    matches it. The pivots go on until they cost what the exact kernel would, then "exact";
    without room for the exact kernel they go on to the cap."""
    X = rows_with_spectrum(np.ones(N))
    chooser = RankChooser(N, D, 1e-6, max_iter=100)
    f = factor(X, chooser)
    chooser.finish(f.rank, f.error)
    assert chooser.decision == "exact"
    assert chooser.seconds(f.rank) >= chooser.exact_seconds
    assert chooser.seconds(chooser.steps[-2].rank) < chooser.exact_seconds
    assert "costs as much as the exact kernel" in chooser.reason
    capped = RankChooser(N, D, 1e-6, max_iter=100, exact_fits=False)
    g = factor(X, capped, max_rank=300)
    capped.finish(g.rank, g.error)
    assert capped.decision == "capped" and g.rank == 300


def test_the_rank_for_the_tolerance_is_extrapolated_over_the_last_doubling():
    """A trace error halving every 10 pivots meets 1e-6 at 10 log2(1e6) pivots."""
    chooser = RankChooser(10_000, 10, 1e-6, max_iter=100)
    for r in (10, 20, 40, 80):
        chooser(PivotStep(r, 0.5 ** (r / 10), 1.0))
    assert chooser.decision is None  # still affordable: keeps pivoting
    assert chooser.rank_for_tol(chooser.steps[-1]) == pytest.approx(10 * math.log2(1e6))


def test_cost_model_terms_grow_as_stated():
    assert exact_kernel_seconds(8000, 10, 100) / exact_kernel_seconds(4000, 10, 100) > 6
    # low rank: n r^2 in the pivots, n r per iteration (besides each iteration's fixed cost)
    fixed = KERNEL_STEP_OVERHEAD * 100
    assert low_rank_seconds(2000, 10, 100, 100) - fixed == pytest.approx(
        2 * (low_rank_seconds(1000, 10, 100, 100) - fixed), rel=0.02)
    assert budget_rank(10_000, 28) == 515 and budget_rank(500, 8) == 256


@pytest.fixture(scope="module")
def slow_rbf():
    """Issue 30's shape, smaller: uniform features, a noisy linear rule, gamma = 1/d."""
    rng = np.random.default_rng(0)
    X = rng.random((3000, 28))
    s = (X - 0.5) @ rng.normal(size=28)
    y = np.where(s + 0.3 * s.std() * rng.normal(size=3000) > 0, 1, -1)
    return X[:2400], y[:2400], X[2400:], y[2400:]


def test_auto_on_a_slowly_decaying_rbf_kernel_keeps_a_fixed_rank_and_iterates_exactly_on_it(
        slow_rbf):
    """The fit records the chooser's decision and reason; its decisions equal those of the
    exact-kernel iteration run on the approximate kernel L L^T given as a precomputed kernel
    (an independent computation of the same model), and its hold-out accuracy is within half
    a point of the exact model's."""
    X, y, Xt, yt = slow_rbf
    params = {"max_iter": 100, "tol": 1e-8}
    auto = MSVMAv(kernel="rbf", gamma=1 / 28, random_state=0, **params).fit(X, y)
    assert auto.kernel_approximation_ == "low_rank"
    assert auto.fit_info_["rank_choice"] == "fixed_rank"
    assert auto.fit_info_["rank_reason"].startswith("trace error")
    assert auto.rank_ <= budget_rank(2400, 28) and auto.kernel_error_ > 1e-6
    chooser = RankChooser(2400, 28, 1e-6, 100, exact_fits=True)
    f = pivoted_cholesky(X, kernel="rbf", gamma=1 / 28, tol=1e-6, random_state=0,
                         max_rank=auto._max_rank(2400), stop=chooser)
    assert f.rank == auto.fit_info_["pivots"]
    K_approx = f.factor.T @ f.factor
    oracle = MSVMAv(kernel="precomputed", approximation="exact", **params).fit(K_approx, y)
    d_auto, d_oracle = auto.decision_function(X), oracle.decision_function(K_approx)
    assert np.abs(d_auto - d_oracle).max() <= 1e-7 * np.abs(d_oracle).max()
    exact = MSVMAv(kernel="rbf", gamma=1 / 28, approximation="exact", **params).fit(X, y)
    assert abs(auto.score(Xt, yt) - exact.score(Xt, yt)) <= 0.005
    assert rbf_kernel(Xt, auto.X_fit_, gamma=1 / 28).shape[1] == auto.rank_


def test_a_first_block_that_nearly_meets_the_tolerance_keeps_pivoting():
    """Extrapolated from rank 0 (trace error 1), a first block of 32 pivots at error 1e-5
    meets 1e-6 within a few more: pivoting goes on even though its gain is already small."""
    chooser = RankChooser(10_000, 10, 1e-6, max_iter=100)
    assert chooser(PivotStep(32, 1e-5, 1e-3)) is False and chooser.decision is None
    assert chooser.rank_for_tol(chooser.steps[-1]) == pytest.approx(32 * 6 / 5)
