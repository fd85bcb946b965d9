"""The "gram" and "dense" paths' margins from bounds (solver/_margin_bounds.py): at every
iteration the set A, theta and the semi-variance equal those of a pass over X, while the fit
passes over X a few times instead of once an iteration; the model is the naive iteration's."""

import numpy as np
import pytest
from scipy import sparse
from threadpoolctl import threadpool_limits

from solver import MSVMAv
from solver.internals import linear_step as linear_step
from solver.internals import margin_bounds as margin_bounds
from solver.internals import msvmav_core as msvmav_core
from solver.internals import row_blocks as row_blocks
from tests.solver.exact_support import (  # (shared with other test modules)
    naive_linear,
    planted,
    rel,
)


def test_row_norms_of_sparse_rows_with_empty_ones_and_of_dense_rows(monkeypatch):
    monkeypatch.setattr(margin_bounds, "CHUNK_BYTES", 800)  # many chunks
    X = sparse.random(300, 40, density=0.1, format="csr", random_state=3)
    X = sparse.vstack([sparse.csr_matrix((5, 40)), X, sparse.csr_matrix((2, 40))], format="csr")
    expected = np.sqrt((X.toarray() ** 2).sum(axis=1))
    assert np.count_nonzero(expected == 0) >= 7
    assert np.allclose(margin_bounds.row_norms(X), expected, rtol=1e-14, atol=0)
    D = X.toarray()
    assert np.allclose(margin_bounds.row_norms(D), expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("dense", [False, True])
def test_every_iteration_summary_equals_a_pass_over_x(dense, monkeypatch):
    """Each iteration's A is exactly {i : y_i x_i . w < theta} of the full margins, theta and
    the semi-variance agree with theirs; most iterations were decided by the bounds, some of
    them computing undecided rows one by one."""
    seen = []
    original = margin_bounds.MarginBounds.summary

    def checked(self, w, moments):
        (theta, mask, sv), product = original(self, w, moments)
        m = self.y * np.asarray(self.X @ w).ravel()  # a full pass, independently
        full_theta = m.mean()
        assert np.array_equal(mask, m < full_theta)
        assert theta == pytest.approx(full_theta, rel=1e-12)
        assert sv == pytest.approx(np.sum(np.maximum(full_theta - m, 0) ** 2) / m.size,
                                   rel=1e-9)
        seen.append((self.passes, self.exact_rows))
        return (theta, mask, sv), product

    monkeypatch.setattr(margin_bounds.MarginBounds, "summary", checked)
    X, y = planted(n=3000 if dense else 4000)
    m = MSVMAv(max_iter=100, tol=0.0, stop="step").fit(X.toarray() if dense else X, y)
    assert m.linear_solver_ == "gram" and m.n_iter_ == 100 and len(seen) == 101
    passes, exact_rows = seen[-1]
    assert passes <= 30  # of 101 summaries
    assert exact_rows > 0


def _count_passes(monkeypatch) -> list:
    """One entry per pass over X (``RowBlocks.matvec``) from here on."""
    passes = []
    matvec = row_blocks.RowBlocks.matvec
    monkeypatch.setattr(row_blocks.RowBlocks, "matvec",
                        lambda self, v: passes.append(1) or matvec(self, v))
    return passes


def test_gram_fit_passes_over_x_a_few_times_and_is_the_naive_model(monkeypatch):
    """A 100-iteration fit: its passes over X (RowBlocks.matvec: the shift's margins, the
    bounds' passes) are a fraction of its iterations, and its products with G about one an
    iteration besides the CG's; the model, theta and the semi-variance
    are those of the naive iteration and of the dense path (margins from a pass each step)."""
    original = row_blocks.RowBlocks.matvec
    passes = _count_passes(monkeypatch)
    products = []
    gram = linear_step.GramSystem._gram
    monkeypatch.setattr(linear_step.GramSystem, "_gram",
                        lambda self, v: products.append(1) or gram(self, v))
    X, y = planted()
    m = MSVMAv(max_iter=100, tol=0.0, stop="step").fit(X, y)
    assert m.linear_solver_ == "gram"
    assert len(passes) <= 30
    # besides the CG's: a summary's G_A w, which the next step's residual reuses (with G_A x
    # followed) but on the steps after a pass and every X_REFRESH solves; not two a step
    extra = len(products) - m.fit_info_["cg_iterations"]
    assert extra <= 101 + len(passes) + 100 // linear_step.X_REFRESH
    monkeypatch.setattr(row_blocks.RowBlocks, "matvec", original)
    dense = MSVMAv(max_iter=100, tol=0.0, stop="step", linear_solver="dense").fit(X, y)
    for key in ("theta", "semivariance"):
        assert np.allclose([h[key] for h in m.history_], [h[key] for h in dense.history_],
                           rtol=1e-9, atol=0)
    assert [h["active"] for h in m.history_] == [h["active"] for h in dense.history_]
    with threadpool_limits(1):
        w, _, _, thetas = naive_linear(X.toarray(), y.astype(float), 16.0, 0.25, T=100,
                                       tol=0.0)
    assert rel(np.r_[m.coef_[0], m.intercept_], w) < 1e-8
    naive_f = np.hstack([X.toarray(), np.ones((X.shape[0], 1))]) @ w
    assert np.max(np.abs(m.decision_function(X) - naive_f)) <= 1e-8
    assert np.allclose([h["theta"] for h in m.history_], thetas, rtol=1e-8)


@pytest.mark.parametrize("max_iter", [1, 2])
def test_the_last_summary_never_rebuilds_the_gram_matrix(max_iter):
    """The early steps change A by more than n / GRAM_REBUILD rows (each step rebuilds G): the
    last iteration's summary then takes a pass over X rather than rebuilding G for its
    semi-variance alone, so a fit of T steps builds G T times, not T + 1."""
    X, y = planted()
    m = MSVMAv(max_iter=max_iter, tol=0.0, stop="step").fit(X, y)
    assert m.linear_solver_ == "gram" and m.n_iter_ == max_iter
    assert m.fit_info_["gram_builds"] == max_iter
    dense = MSVMAv(max_iter=max_iter, tol=0.0, stop="step", linear_solver="dense").fit(X, y)
    assert np.allclose([h["semivariance"] for h in m.history_],
                       [h["semivariance"] for h in dense.history_], rtol=1e-9, atol=0)


def tall(n: int = 6000, d: int = 8, seed: int = 1):
    """Dense rows in [0, 1) on a 4-decimal grid, few features (the training job's kind of
    data, smaller): "auto" takes the "dense" step."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 10_000, size=(n, d)) / 10_000
    y = np.where((X - 0.5) @ rng.normal(size=d) + rng.normal(scale=0.5, size=n) > 0, 1, -1)
    return X, y


def test_dense_path_summaries_equal_a_pass_and_it_passes_over_x_a_few_times(monkeypatch):
    """On "dense" too, every iteration's A, theta and semi-variance are a pass's, while the
    fit's passes over X (RowBlocks.matvec) are a fraction of its 100 iterations (before, one an
    iteration); the model is the naive iteration's and the reference "rebuild" path's."""
    seen = []
    original = margin_bounds.MarginBounds.summary

    def checked(self, w, moments):
        (theta, mask, sv), product = original(self, w, moments)
        m = self.y * (self.X @ w)
        assert np.array_equal(mask, m < m.mean())
        assert theta == pytest.approx(m.mean(), rel=1e-12)
        assert sv == pytest.approx(np.sum(np.maximum(m.mean() - m, 0) ** 2) / m.size, rel=1e-9)
        seen.append(self.exact_rows)
        return (theta, mask, sv), product

    monkeypatch.setattr(margin_bounds.MarginBounds, "summary", checked)
    monkeypatch.setattr(msvmav_core, "DENSE_BOUNDS_VALUES", 0)  # this data is small
    passes = _count_passes(monkeypatch)
    X, y = tall()
    m = MSVMAv(max_iter=100, tol=0.0, stop="step").fit(X, y)
    assert m.linear_solver_ == "dense" and m.n_iter_ == 100 and len(seen) == 101
    assert len(passes) <= 30 and m.fit_info_["margin_passes"] <= 30 and seen[-1] > 0
    monkeypatch.undo()
    reference = MSVMAv(max_iter=100, tol=0.0, stop="step", update="rebuild").fit(X, y)
    assert [h["active"] for h in m.history_] == [h["active"] for h in reference.history_]
    with threadpool_limits(1):
        w, _, _, thetas = naive_linear(X, y.astype(float), 16.0, 0.25, T=100, tol=0.0)
    assert rel(np.r_[m.coef_[0], m.intercept_], w) < 1e-8
    assert np.max(np.abs(m.decision_function(X) - (X @ w[:-1] + w[-1]))) <= 1e-8
    assert np.allclose([h["theta"] for h in m.history_], thetas, rtol=1e-8)


@pytest.mark.parametrize("sparse_rows", [False, True])
def test_dense_moments_are_those_of_the_set_asked_and_leave_the_system_as_it_was(sparse_rows):
    from solver.internals import MOMENTS_ROWS, PrimalSystem

    rng = np.random.default_rng(2)
    X, y = tall(n=640, d=6)
    X = np.hstack([X, np.ones((X.shape[0], 1))])
    Xs = sparse.csr_matrix(X) if sparse_rows else X
    system = PrimalSystem(Xs, y.astype(float), np.full(X.shape[1], 5.0))
    A = rng.random(640) < 0.5
    system.set_active(A)
    G, sA, mask = system.G.copy(), system.sA.copy(), system.mask.copy()
    w = rng.normal(size=X.shape[1])
    M = A.copy()
    M[rng.choice(640, size=640 // MOMENTS_ROWS, replace=False)] ^= True  # at the limit
    squares, signed, product = system.moments(M, w)
    XM = X[M]
    assert product == pytest.approx(XM.T @ (XM @ w), rel=1e-12)
    assert squares == pytest.approx(float(np.sum((XM @ w) ** 2)), rel=1e-12)
    assert signed == pytest.approx(float(y[M] @ (XM @ w)), rel=1e-12)
    assert np.array_equal(system.G, G) and np.array_equal(system.sA, sA)
    assert np.array_equal(system.mask, mask)
    M[np.flatnonzero(M == A)[0]] ^= True  # one row more than n / MOMENTS_ROWS differs
    assert system.moments(M, w) is None


def test_small_dense_data_takes_a_pass_each_iteration_and_larger_the_bounds():
    """Below DENSE_BOUNDS_VALUES values a pass costs less than the bounds' bookkeeping."""
    X, y = tall(n=2000, d=8)
    assert X.shape[0] * (X.shape[1] + 1) < msvmav_core.DENSE_BOUNDS_VALUES
    small = MSVMAv(max_iter=20, tol=0.0, stop="step").fit(X, y)
    assert small.linear_solver_ == "dense" and "margin_passes" not in small.fit_info_
    X, y = tall(n=msvmav_core.DENSE_BOUNDS_VALUES // 9 + 1, d=8)
    large = MSVMAv(max_iter=20, tol=0.0, stop="step").fit(X, y)
    assert large.linear_solver_ == "dense" and large.fit_info_["margin_passes"] < 21
