"""The "gram" path's kernels (solver/_gram_matrix.py) against X_A^T X_A formed densely: the build
(A's rows cut into pieces, one a thread, each piece's upper triangle in bands, formed a few
output rows at a time, summed and copied onto the lower triangle), and folds of rows
entering and leaving A into G's upper triangle."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from solver import MSVMAv
from solver.internals import GramSystem, fold, fold_pairs, rows_gram
from solver.internals import gram_matrix as gram_matrix


def mixed_rows(n: int = 400, d: int = 64, seed: int = 0) -> sparse.csr_matrix:
    """Rows of 0-10 values, and a few with more than D / DENSE_ROW (densified in a fold)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 11, size=n)
    counts[::50] = d // 2
    cols = [np.sort(rng.choice(d, size=k, replace=False)) for k in counts]
    indptr = np.r_[0, np.cumsum(counts)]
    return sparse.csr_matrix((rng.random(indptr[-1]) + 0.1, np.concatenate(cols), indptr),
                             shape=(n, d))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows_at_once", [7, None])  # output rows formed a few at a time
@pytest.mark.parametrize("bands", [1, 3, 8, 80])  # the upper triangle's bands; 80 > D: D bands
# scipy's kernels called directly; missing (P @ B); or refusing their arguments (P @ B)
@pytest.mark.parametrize("direct", ["called", "missing", "refused"])
def test_build_equals_the_dense_product(threads, rows_at_once, bands, direct, monkeypatch):
    kernel = gram_matrix._csr_matmat
    assert kernel is not None  # this scipy has them: every way is tested
    calls = []
    if direct == "called":
        def counted(*args):
            calls.append(args[0])
            return kernel(*args)

        monkeypatch.setattr(gram_matrix, "_csr_matmat", counted)
    if direct == "missing":
        monkeypatch.setattr(gram_matrix, "_csr_matmat", None)
    if direct == "refused":
        def refuse(*args):
            raise TypeError("another signature")

        monkeypatch.setattr(gram_matrix, "_csr_matmat", refuse)
    monkeypatch.setattr(gram_matrix, "PARALLEL_MIN_NNZ", 0)
    monkeypatch.setattr(gram_matrix, "UPPER_BANDS", bands)
    D = 120
    if rows_at_once:
        monkeypatch.setattr(gram_matrix, "OUTPUT_BYTES", 12 * D * rows_at_once)
    # ~3.6 values a row: sparse rows (at most D / DENSE_ROW), so the sparse product builds G
    # (with 4 values a row of 50 columns it was the densified rows' dsyrk, and the bands,
    # threads and output blocks here went untested)
    X = sparse.random(900, D, density=0.03, format="csr", random_state=3)
    mask = np.random.default_rng(4).random(900) < 0.6
    assert gram_matrix.stored(X, np.flatnonzero(mask)) * gram_matrix.DENSE_ROW <= mask.sum() * D
    G = rows_gram(X, mask, threads)
    XA = X[mask].toarray()
    assert G.flags.c_contiguous and G.shape == (D, D)
    assert np.allclose(G, XA.T @ XA, rtol=1e-13, atol=1e-13)
    # the kernel formed every output row (each of G's D rows, in its band's upper part) once
    # for each piece of A's rows: one a thread, at most BUILD_PARTS
    pieces = min(threads, gram_matrix.BUILD_PARTS)
    assert (sum(calls) == D * pieces) == (direct == "called")
    assert not rows_gram(X, np.zeros(900, dtype=bool), threads).any()


def test_build_of_dense_rows_and_dense_x():
    rng = np.random.default_rng(5)
    X = rng.random((300, 40))
    mask = rng.random(300) < 0.5
    XA = X[mask]
    assert np.allclose(rows_gram(X, mask), XA.T @ XA, rtol=1e-13)
    S = sparse.csr_matrix(X)  # 40 values a row > D / DENSE_ROW: densified blocks
    assert np.allclose(rows_gram(S, mask), XA.T @ XA, rtol=1e-13)


@pytest.mark.parametrize("dense", [False, True])
def test_fold_adds_and_removes_rows_in_the_upper_triangle(dense):
    """G_R + U^T S U for rows entering (+1) and leaving (-1), sparse rows of many lengths
    (each length a group of pairs), empty rows and rows wide enough to be densified."""
    X = mixed_rows()
    rng = np.random.default_rng(6)
    before = rng.random(400) < 0.5
    after = before.copy()
    flip = rng.choice(400, size=60, replace=False)
    after[flip] = ~after[flip]
    G = rows_gram(X, before)
    differ = np.flatnonzero(after != before)
    sign = np.where(after[differ], 1.0, -1.0)
    U = X[differ].toarray() if dense else X[differ]
    fold(G, U, sign)
    XA = X[after].toarray()
    iu = np.triu_indices(64)
    assert np.allclose(G[iu], (XA.T @ XA)[iu], rtol=1e-12, atol=1e-12)


def test_fold_sorts_unsorted_columns_first():
    """A pair's entry is (smaller column, larger column) even when a row's columns are stored
    out of order."""
    U = sparse.csr_matrix((np.array([2.0, 3.0, 5.0]), np.array([57, 1, 24]), np.array([0, 3])),
                          shape=(1, 64))
    U.has_sorted_indices = False
    G = np.zeros((64, 64))
    fold(G, U, np.array([1.0]))
    dense = U.toarray()
    iu = np.triu_indices(64)
    assert np.array_equal(G[iu], (dense.T @ dense)[iu])
    assert not np.tril(G, -1).any()  # a sparse fold writes the upper triangle only


def test_fold_pairs_counts_each_rows_upper_pairs():
    X = mixed_rows()
    rows = np.arange(0, 400, 7)
    counts = np.diff(X.indptr)[rows]
    counts = np.where(counts * gram_matrix.DENSE_ROW > 64, 64, counts)
    assert fold_pairs(X, rows) == int(np.sum(counts * (counts + 1) // 2))
    assert fold_pairs(X.toarray(), rows) == rows.size * 64 * 65 // 2


def test_sparse_rows_are_folded_every_outer_iteration():
    """On sparse data the rows that entered and left A are added into G at each step, so no
    step's products pass over rows carried beside G."""
    X = sparse.random(3000, 700, density=0.02, format="csr", random_state=7)
    y = np.where(np.asarray(X[:, :40].sum(axis=1)).ravel() > np.median(
        np.asarray(X[:, :40].sum(axis=1)).ravel()), 1, -1)
    m = MSVMAv(linear_solver="gram", max_iter=20).fit(X, y)
    info = m.fit_info_
    assert info["gram_folds"] >= 15
    assert info["unfolded_changes"] == 0


def test_gram_step_follows_g_a_of_the_previous_solution():
    """The right-hand side's norm comes from G_A x for the warm start x (the previous two steps
    extrapolated), followed through the rows entering and leaving A rather than recomputed: it
    equals X_A^T X_A x, the steps equal direct solves, and one product a step is saved
    (counted)."""
    X = sparse.random(800, 90, density=0.03, format="csr", random_state=8)
    rng = np.random.default_rng(9)
    y = np.where(rng.random(800) < 0.5, 1.0, -1.0)
    c = 0.05 * 800
    system = GramSystem(X, y, c)
    products = 0
    original = system._gram

    def counted(v):
        nonlocal products
        products += 1
        return original(v)

    system._gram = counted
    mask = rng.random(800) < 0.5
    w, theta = rng.normal(size=90), 0.3
    saved = 0
    for k in range(12):
        flip = rng.choice(800, size=2 + k, replace=False)
        mask[flip] = ~mask[flip]
        builds = system.counters["gram_builds"]
        system.set_active(mask.copy())
        rebuilt = system.counters["gram_builds"] > builds  # G_A x unknown: computed
        XA = X[mask].toarray()
        M = c * np.eye(90) + XA.T @ XA
        b = theta * XA.T @ y[mask] - XA.T @ (XA @ w)
        warm = np.linalg.norm(b - M @ system.warm.guess()[0]) < np.linalg.norm(b)
        before, iterations = products, system.counters["cg_iterations"]
        delta = system.step(w, theta, np.zeros(800))
        assert np.allclose(delta, np.linalg.solve(M, b), rtol=1e-9, atol=1e-10)
        kept = system.warm
        assert np.allclose(kept.g_previous, XA.T @ (XA @ delta), rtol=1e-9, atol=1e-9)
        if kept.g_before is not None:
            assert np.allclose(kept.g_before, XA.T @ (XA @ kept.before), rtol=1e-9,
                               atol=1e-9)
        if k:  # b and the warm start's residual from one product (b afresh after a rebuild,
            # or if zero is the better start), then the CG's
            used = products - before - (system.counters["cg_iterations"] - iterations)
            assert used == (1 if warm and not rebuilt else 2)
            saved += used == 1
        w = (w + delta) / np.linalg.norm(w + delta)
    assert saved >= 8
