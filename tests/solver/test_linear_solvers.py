"""The three ways of solving linear MSVMAv's step (dense D x D system, |A|-space Woodbury form,
matrix-free conjugate gradients) give the paper's iterates: each against the naive
implementation of test_msvmav_exact, on dense and sparse inputs; the automatic choice, the
override and the recorded path."""

import json
import tracemalloc
from functools import cache

import numpy as np
import pytest
from scipy import sparse
from threadpoolctl import threadpool_limits

from solver import MSVMAv, model_from_dict
from solver.internals import (
    DENSE_MAX_DIM,
    GRAM_MAX_DIM,
    WOODBURY_MAX_ROWS,
    ConjugateGradientSystem,
    GramSystem,
    choose_linear_solver,
    gram_step,
)
from solver.internals import linear_step as linear_step
from solver.params import InvalidParameterError
from tests.solver.exact_support import PARAMS, STEP, naive_linear, rel

SOLVERS = ["dense", "woodbury", "cg", "gram"]


@cache
def naive(make, alpha, beta):
    """The naive iteration's result, once per problem (one BLAS thread: its many small solves
    are slower with several on a busy machine)."""
    X, y = make()
    Xd = X.toarray() if sparse.issparse(X) else X
    with threadpool_limits(1):
        return naive_linear(Xd, y.astype(float), alpha, beta)


def tall():
    rng = np.random.default_rng(0)
    X = rng.random((240, 6))
    y = np.where(X[:, 0] - 0.7 * X[:, 1] + 0.2 * rng.normal(size=240) > 0.1, 1, -1)
    return X, y


def wide():
    rng = np.random.default_rng(1)
    X = sparse.random(60, 300, density=0.05, format="csr", random_state=2)
    y = np.where(np.asarray(X[:, :30].sum(axis=1)).ravel() + 0.1 * rng.normal(size=60) > 0.4,
                 1, -1)
    return X, y


@pytest.mark.parametrize("alpha,beta", PARAMS[:2])
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("make", [tall, wide])
@pytest.mark.parametrize("as_sparse", [False, True])
def test_every_solver_matches_the_naive_iteration(make, solver, alpha, beta, as_sparse):
    X, y = make()
    Xd = X.toarray() if sparse.issparse(X) else X
    Xin = sparse.csr_matrix(Xd) if as_sparse else Xd
    w, n_iter, _, thetas = naive(make, alpha, beta)
    m = MSVMAv(alpha=alpha, beta=beta, linear_solver=solver, **STEP).fit(Xin, y)
    assert m.linear_solver_ == solver
    assert m.n_iter_ == n_iter
    assert rel(np.r_[m.coef_[0], m.intercept_], w) < 1e-8
    naive_f = np.hstack([Xd, np.ones((Xd.shape[0], 1))]) @ w
    assert np.max(np.abs(m.decision_function(Xin) - naive_f)) <= 1e-8
    assert np.allclose([h["theta"] for h in m.history_], thetas, rtol=1e-8)


@pytest.mark.parametrize("solver", ["woodbury", "cg", "gram"])
def test_multiclass_and_no_intercept_agree_with_the_dense_path(solver):
    rng = np.random.default_rng(5)
    X = sparse.random(90, 600, density=0.03, format="csr", random_state=6)
    y = rng.integers(0, 3, size=90)
    for intercept in (True, False):
        ref = MSVMAv(linear_solver="dense", fit_intercept=intercept, max_iter=40).fit(X, y)
        other = MSVMAv(linear_solver=solver, fit_intercept=intercept, max_iter=40).fit(X, y)
        assert other.n_iter_ == ref.n_iter_
        assert np.max(np.abs(other.decision_function(X) - ref.decision_function(X))) <= 1e-8


@pytest.mark.parametrize("n,d,per_row,expected", [
    (1000, 100, None, "dense"), (10**6, DENSE_MAX_DIM - 1, None, "dense"),
    (30, 12000, None, "woodbury"), (WOODBURY_MAX_ROWS, 100000, None, "woodbury"),
    (WOODBURY_MAX_ROWS + 1, 100000, None, "cg"), (100000, 100000, None, "cg"),
    (100000, 100000, 50, "cg"), (400, 300, None, "dense"), (200, 600, None, "woodbury"),
    # a few thousand features and enough stored values: the kept Gram matrix
    (100000, 2000, None, "gram"), (100000, 2000, 50, "gram"),
    (100000, GRAM_MAX_DIM - 1, None, "gram"), (100000, GRAM_MAX_DIM, None, "cg"),
    # too few stored values for the D x D products to pay: matrix-free CG
    (100000, 4000, 5, "cg"), (600, 2000, None, "gram"), (300, 2000, None, "cg")])
def test_automatic_choice_by_shape(n, d, per_row, expected):
    nnz = None if per_row is None else n * per_row
    assert MSVMAv().linear_path(n, d, nnz) == expected
    stored = None if nnz is None else nnz + n  # with the intercept's column
    assert choose_linear_solver("auto", n, d + 1, stored) == expected
    # an explicit choice always wins
    for solver in SOLVERS:
        assert MSVMAv(linear_solver=solver).linear_path(n, d, nnz) == solver


def test_fit_records_the_automatic_choice():
    rng = np.random.default_rng(0)
    Xw = sparse.random(60, 1200, density=0.02, format="csr", random_state=2)
    assert MSVMAv(max_iter=3).fit(Xw, rng.integers(0, 2, 60)).linear_solver_ == "woodbury"
    Xt, yt = tall()
    assert MSVMAv(max_iter=3).fit(Xt, yt).linear_solver_ == "dense"
    rng = np.random.default_rng(0)
    Xc = sparse.random(300, 900, density=0.01, format="csr", random_state=1)
    yc = rng.integers(0, 2, size=300)
    assert MSVMAv(max_iter=3).fit(Xc, yc).linear_solver_ == "cg"
    Xg = rng.random((700, 600))
    assert MSVMAv(max_iter=3).fit(Xg, rng.integers(0, 2, 700)).linear_solver_ == "gram"
    assert MSVMAv(kernel="rbf", max_iter=3).fit(Xt, yt).linear_solver_ is None


def test_the_path_is_stored_with_the_model():
    X, y = wide()
    m = MSVMAv(linear_solver="cg", max_iter=10).fit(X, y)
    data = m.to_dict()
    meta = json.loads(json.dumps(data["meta"]))
    assert meta["attributes"]["linear_solver_"] == "cg"
    assert meta["params"]["linear_solver"] == "cg"
    back = model_from_dict({"meta": meta, "arrays": data["arrays"]})
    assert back.linear_solver_ == "cg"
    assert np.array_equal(back.decision_function(X), m.decision_function(X))


def test_unknown_solver_is_refused():
    X, y = tall()
    with pytest.raises(InvalidParameterError, match="linear_solver"):
        MSVMAv(linear_solver="qr").fit(X, y)


def test_cg_never_densifies_x_nor_forms_the_gram_matrix():
    """A million features: the dense system would need 16 TB, X densified 16 GB."""
    rng = np.random.default_rng(0)
    n, d, k = 2000, 1_000_000, 10
    cols = rng.integers(0, d, size=(n, k))
    X = sparse.csr_matrix((rng.random(n * k), cols.ravel(), np.arange(0, n * k + 1, k)),
                          shape=(n, d))
    X.sum_duplicates()
    y = np.where(X[:, : d // 2].sum(axis=1).A.ravel() > X[:, d // 2:].sum(axis=1).A.ravel(),
                 1, -1)
    tracemalloc.start()
    try:
        m = MSVMAv(max_iter=5).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert m.linear_solver_ == "cg"
    # ~ 17 D-vectors (8 MB each: the CG vectors, Jacobi's and the Schur diagonals, X_A^T 1_A,
    # the previous two steps and X_A^T X_A of each) and a copy of X; X densified: 16 GB
    assert peak < 210 * 2**20
    assert m.score(X, y) > 0.8


def test_gram_system_folds_a_large_change_cheaper_than_a_build():
    """More than n / GRAM_REBUILD rows change, but fewer than A's rows / FOLD_COST: they are
    folded into G (no second build), and G_A v stays X_A^T X_A v."""
    rng = np.random.default_rng(5)
    n, d = 2000, 300
    X = sparse.random(n, d, density=10 / d, format="csr", random_state=6)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    system = GramSystem(X, y, 0.1 * n)
    mask = rng.random(n) < 0.6
    system.set_active(mask.copy())
    flip = rng.choice(n, size=n // 5, replace=False)  # 400 > n / 16 = 125, < |A| / 1.5
    mask[flip] = ~mask[flip]
    system.set_active(mask.copy())
    assert system.counters["gram_builds"] == 1 and system.counters["gram_folds"] == 1
    XA = X[mask].toarray()
    v = rng.normal(size=d)
    assert np.allclose(system._gram(v), XA.T @ (XA @ v), rtol=1e-12, atol=1e-12)
    assert np.allclose(system.diag, 0.1 * n + (XA * XA).sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("per_row", [2, 20, None])  # G built by a sparse product / blocks
def test_gram_system_products_equal_the_active_rows_gram_matrix(per_row, monkeypatch):
    """After many mixed entries and exits, the kept Gram system's G_A v, s_A and Jacobi
    diagonal equal X_A^T X_A v, X_A^T y_A and c + diag computed directly from the active rows,
    whether the differing rows are applied in the products, added into G (when they hold more
    values than D / 2 rows of the data do; GRAM_FOLD scaled so, or more than n / 16 at once
    but folding them is cheaper than a build) or G rebuilt (more than n / 16 at once and more
    than A's rows / FOLD_COST)."""
    rng = np.random.default_rng(3)
    n, d = 1000, 60
    monkeypatch.setattr(gram_step, "GRAM_FOLD", 0.5 * (per_row or d) / d)
    X = (sparse.random(n, d, density=per_row / d, format="csr", random_state=4)
         if per_row else rng.random((n, d)))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    system = GramSystem(X, y, 0.1 * n)  # base: a scalar c is broadcast
    mask = rng.random(n) < 0.5
    for k in range(40):
        size = {14: 100, 29: 900}.get(k, rng.integers(1, 8))  # 100: folded; 900: rebuilt
        flip = rng.choice(n, size=size, replace=False)
        mask[flip] = ~mask[flip]
        system.set_active(mask.copy())
        XA = X[mask].toarray() if per_row else X[mask]
        v = rng.normal(size=d)
        assert np.allclose(system._gram(v), XA.T @ (XA @ v), rtol=1e-12, atol=1e-12)
        assert np.allclose(system.sA, XA.T @ y[mask], rtol=1e-12, atol=1e-12)
        assert np.allclose(system.diag, 0.1 * n + (XA * XA).sum(axis=0), rtol=1e-12)
    # every way was taken: rows applied in the products, folded into G, G rebuilt
    counts = system.counters
    assert counts["unfolded_changes"] + counts["gram_folds"] > 30
    assert counts["gram_folds"] >= 2 and counts["gram_builds"] >= 2


def test_automatic_gram_path_matches_the_naive_iteration():
    """A shape where "auto" keeps the Gram matrix (D = 601 > 512, X holds more than D^2 / 4
    values): the paper's iterates, and the rows differing from the kept set's (not rebuilds
    only) did the work."""
    rng = np.random.default_rng(7)
    n, d = 1200, 600
    X = sparse.random(n, d, density=0.15, format="csr", random_state=8)
    y = np.where(np.asarray(X[:, :60].sum(axis=1)).ravel() + 0.3 * rng.normal(size=n) > 0.9,
                 1, -1)
    m = MSVMAv(**STEP).fit(X, y)
    assert m.linear_solver_ == "gram"
    info = m.fit_info_
    assert info["gram_folds"] + info["unfolded_changes"] > info["gram_builds"]
    with threadpool_limits(1):
        w, n_iter, _, thetas = naive_linear(X.toarray(), y.astype(float), 16.0, 0.25)
    assert m.n_iter_ == n_iter
    assert rel(np.r_[m.coef_[0], m.intercept_], w) < 1e-8
    naive_f = np.hstack([X.toarray(), np.ones((n, 1))]) @ w
    assert np.max(np.abs(m.decision_function(X) - naive_f)) <= 1e-8
    assert np.allclose([h["theta"] for h in m.history_], thetas, rtol=1e-8)


def _biased(n: int, d: int, per_row: int, seed: int):
    """CSR rows of [0, 1) values with the intercept's constant 1 appended (as fit does)."""
    X = sparse.random(n, d, density=per_row / d, format="csr", random_state=seed)
    return sparse.hstack([X, np.ones((n, 1))], format="csr")


@pytest.mark.parametrize("kind", [ConjugateGradientSystem, GramSystem])
def test_bias_preconditioner_is_the_documented_arrow_matrix(kind):
    """P^{-1} r solves P x = r for P = [[d_S + z z^T / m, z], [z^T, m]] formed explicitly, with
    z = X_A^T 1_A and m = c + |A| kept current through entries, exits and rebuilds."""
    rng = np.random.default_rng(11)
    X = _biased(600, 40, 6, 12)
    y = np.where(rng.random(600) < 0.5, 1.0, -1.0)
    system = kind(X, y, 0.05 * 600, bias=True)
    mask = rng.random(600) < 0.5
    for k in range(12):
        flip = rng.choice(600, size=200 if k == 6 else 5, replace=False)
        mask[flip] = ~mask[flip]
        system.set_active(mask.copy())
        XA = X[mask].toarray()
        z_full = XA.T @ np.ones(mask.sum())
        assert np.allclose(system.ones, z_full, rtol=1e-12, atol=1e-12)
        z, m = z_full[:-1], 0.05 * 600 + mask.sum()
        d_S = 0.05 * 600 + (XA[:, :-1] ** 2).sum(axis=0) - z * z / m
        P = np.zeros((41, 41))
        P[:-1, :-1] = np.diag(d_S) + np.outer(z, z) / m
        P[:-1, -1] = P[-1, :-1] = z
        P[-1, -1] = m
        r = rng.normal(size=41)
        assert np.allclose(P @ system._precondition(r, np.empty(41)), r, rtol=1e-10)
        assert np.all(np.linalg.eigvalsh(P) > 0)


@pytest.mark.parametrize("solver", ["cg", "gram"])
def test_bias_preconditioner_needs_fewer_iterations_for_the_same_model(solver, monkeypatch):
    """Data of one sign, small beta (the hard end of the paper's grid): eliminating the bias
    column in the preconditioner cuts the CG iterations, and the iterates stay the paper's."""
    X = sparse.random(3000, 700, density=0.05, format="csr", random_state=21)
    score = np.asarray(X[:, :50].sum(axis=1)).ravel()
    y = np.where(score > np.median(score), 1, -1)
    params = {"linear_solver": solver, "beta": 2.0**-8, "max_iter": 15, **STEP}
    with_bias = MSVMAv(**params).fit(X, y)
    monkeypatch.setattr(linear_step.ConjugateGradientSystem, "_keep_schur", lambda self: None)
    monkeypatch.setattr(linear_step.ConjugateGradientSystem, "_precondition",
                        lambda self, r, out: np.divide(r, self.diag, out=out))
    jacobi = MSVMAv(**params).fit(X, y)
    # measured 402 against 512 (cg), about a fifth fewer on such data at every beta tried
    assert with_bias.fit_info_["cg_iterations"] < 0.9 * jacobi.fit_info_["cg_iterations"]
    assert np.max(np.abs(with_bias.decision_function(X) - jacobi.decision_function(X))) < 1e-9
    with threadpool_limits(1):
        w, _, _, _ = naive_linear(X.toarray(), y.astype(float), 16.0, 2.0**-8, T=15)
    assert rel(np.r_[with_bias.coef_[0], with_bias.intercept_], w) < 1e-8


@pytest.mark.parametrize("solver", ["cg", "gram"])
def test_extrapolated_warm_start_needs_fewer_iterations_for_the_same_model(solver,
                                                                          monkeypatch):
    """Each solve starts from the previous two steps' solutions extrapolated: fewer CG
    iterations than from the previous step alone, and the same iterates (the naive ones)."""
    X = sparse.random(4000, 700, density=0.04, format="csr", random_state=31)
    score = np.asarray(X[:, :60].sum(axis=1)).ravel()
    y = np.where(score > np.median(score), 1, -1)
    params = {"linear_solver": solver, "max_iter": 40, **STEP}
    extrapolated = MSVMAv(**params).fit(X, y)
    monkeypatch.setattr(linear_step.WarmStart, "guess",
                        lambda self: (self.previous.copy(), None if self.g_previous is None
                                      else self.g_previous.copy(), None))
    previous = MSVMAv(**params).fit(X, y)
    assert extrapolated.fit_info_["cg_iterations"] < previous.fit_info_["cg_iterations"]
    assert np.max(np.abs(extrapolated.decision_function(X) - previous.decision_function(X))
                  ) < 1e-9
    with threadpool_limits(1):
        w, _, _, _ = naive_linear(X.toarray(), np.where(y > 0, 1.0, -1.0), 16.0, 0.25, T=40)
    assert rel(np.r_[extrapolated.coef_[0], extrapolated.intercept_], w) < 1e-8


def calls_to(monkeypatch, owner, name: str) -> list[int]:
    """A list that grows by one at each call of owner.name (the method still runs)."""
    calls: list[int] = []
    original = getattr(owner, name)
    monkeypatch.setattr(owner, name,
                        lambda self, *args: calls.append(1) or original(self, *args))
    return calls


def test_cg_path_follows_the_margins_through_its_iterations(monkeypatch):
    """On "cg" the margins X w' come from X x, followed through the CG (each product's X p),
    not from a pass over X each step (recomputed every F_REFRESH steps); the iterates stay the
    naive ones."""
    from solver.internals import msvmav_core as core

    calls = calls_to(monkeypatch, core.PrimalSpace, "decision")
    X, y = wide()
    m = MSVMAv(linear_solver="cg", max_iter=60, tol=0.0, stop="step").fit(X, y)
    assert m.n_iter_ == 60
    assert len(calls) == 1 + 60 // core.F_REFRESH  # the start, and one refresh
    with threadpool_limits(1):
        w, _, _, thetas = naive_linear(X.toarray(), np.where(y > 0, 1.0, -1.0), 16.0, 0.25,
                                       T=60, tol=0.0)
    assert rel(np.r_[m.coef_[0], m.intercept_], w) < 1e-8
    assert np.allclose([h["theta"] for h in m.history_], thetas, rtol=1e-8)


def test_cg_path_passes_over_x_only_in_its_products(monkeypatch):
    """On "cg" the warm start's X x comes from the previous solves' followed X x (afresh every
    X_REFRESH solves) and the margins from the CG too: besides one pass per CG product, a fit
    of 60 steps makes only a handful of passes over X (the start, and the refreshes), not
    two a step; the iterates stay the naive ones."""
    from solver.internals import row_blocks as row_blocks

    passes = calls_to(monkeypatch, row_blocks.RowBlocks, "matvec")
    X, y = wide()
    m = MSVMAv(linear_solver="cg", max_iter=60, tol=0.0, stop="step").fit(X, y)
    extra = len(passes) - m.fit_info_["cg_iterations"]
    # the shift's margins, the start's, a margin refresh and two fresh X x of a start (5)
    assert extra == 5
    with threadpool_limits(1):
        w, _, _, _ = naive_linear(X.toarray(), np.where(y > 0, 1.0, -1.0), 16.0, 0.25, T=60,
                                  tol=0.0)
    assert rel(np.r_[m.coef_[0], m.intercept_], w) < 1e-8
