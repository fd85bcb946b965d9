"""The linear step's threaded products (solver/_row_blocks.py): the same numbers as scipy's
single-threaded products, on as many threads as the fit may use, in a forked child too."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from scipy import sparse
from threadpoolctl import threadpool_limits

from solver import MSVMAv
from solver.internals import RowBlocks, fit_threads, run_parallel
from solver.internals import gram_matrix as gram_matrix
from solver.internals import row_blocks as row_blocks
from solver.internals import split_row_blocks as split_rows


def csr(n: int, d: int, per_row: int, seed: int = 0) -> sparse.csr_matrix:
    X = sparse.random(n, d, density=per_row / d, format="csr", random_state=seed)
    X.data += 0.1
    return X


@pytest.fixture
def small_parallel(monkeypatch):
    """Blocks and threads for matrices of any size (the threshold is a speed choice)."""
    monkeypatch.setattr(row_blocks, "PARALLEL_MIN_NNZ", 0)
    monkeypatch.setattr(gram_matrix, "PARALLEL_MIN_NNZ", 0)


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_products_equal_scipys(threads, small_parallel):
    X = csr(1001, 37, 5)
    for lo, hi in [(17, 18), (500, 520)]:  # empty rows, at a block edge or not
        X.data[X.indptr[lo]:X.indptr[hi]] = 0.0
    X.eliminate_zeros()
    rng = np.random.default_rng(1)
    v, u, U = rng.normal(size=37), rng.normal(size=1001), rng.normal(size=(1001, 2))
    rows = RowBlocks(X, threads)
    assert len(rows.blocks) == threads
    assert rows.blocks[0][0] == 0 and rows.blocks[-1][1] == 1001
    for (_, hi, _, _), (lo, _, _, _) in zip(rows.blocks[:-1], rows.blocks[1:], strict=True):
        assert hi == lo  # contiguous, covering every row once
    for _, _, block, transposed in rows.blocks:  # views of X's arrays, not copies
        assert np.shares_memory(block.data, X.data) and transposed.data is block.data
    assert np.allclose(rows.matvec(v), X @ v, rtol=1e-14, atol=1e-14)
    assert np.allclose(rows.rmatvec(u), X.T @ u, rtol=1e-13, atol=1e-13)
    assert np.allclose(rows.rmatvec(U), X.T @ U, rtol=1e-13, atol=1e-13)
    assert rows.rmatvec(U).shape == (37, 2)


def test_one_block_when_small_dense_or_single_threaded():
    X = csr(500, 20, 4)
    assert RowBlocks(X, 4).blocks == []  # under PARALLEL_MIN_NNZ
    assert RowBlocks(X.toarray(), 4).blocks == []
    v = np.arange(20.0)
    assert np.array_equal(RowBlocks(X.toarray(), 4).matvec(v), X.toarray() @ v)


def test_split_rows_balances_stored_values():
    X = sparse.csr_matrix(np.tril(np.ones((400, 400))))  # row i holds i + 1 values
    parts = split_rows(X.indptr, 2)
    counts = [X.indptr[hi] - X.indptr[lo] for lo, hi in parts]
    assert parts[0][0] == 0 and parts[-1][1] == 400
    assert abs(counts[0] - counts[1]) <= 400  # within one row of equal, not 200 rows each
    assert parts[0][1] > 250


def test_split_rows_of_a_slice_of_indptr():
    """A slice of a larger matrix's indptr (a band of the Gram build's rows) starts above 0:
    its rows are still split in parts of about equal stored values (they were one part: the
    later bands of the build ran on one thread)."""
    indptr = np.arange(0, 1001, 10)[50:]  # rows 50..99 of a matrix of 10 values a row
    assert split_rows(indptr, 2) == [(0, 25), (25, 50)]
    assert split_rows(indptr, 3) == [(0, 17), (17, 34), (34, 50)]


def test_threads_follow_the_blas_limit_in_force():
    with threadpool_limits(1, user_api="blas"):
        assert fit_threads() == 1
    assert 1 <= fit_threads() <= row_blocks.MAX_THREADS


def test_threaded_gram_matrix_equals_the_serial_one(small_parallel):
    X = csr(3000, 50, 3)
    mask = np.random.default_rng(2).random(3000) < 0.5
    serial = gram_matrix.rows_gram(X, mask, 1)
    threaded = gram_matrix.rows_gram(X, mask, 3)
    XA = X[mask].toarray()
    assert np.allclose(threaded, XA.T @ XA, rtol=1e-12, atol=1e-12)
    assert np.allclose(threaded, serial, rtol=1e-13, atol=1e-13)
    assert threaded.flags.c_contiguous
    assert not gram_matrix.rows_gram(X, np.zeros(3000, dtype=bool), 3).any()


@pytest.mark.parametrize("solver", ["cg", "gram"])
def test_threaded_fit_equals_the_single_threaded_one(solver, small_parallel, monkeypatch):
    X = csr(2000, 700, 30, seed=5)
    y = np.where(np.asarray(X[:, :70].sum(axis=1)).ravel() > np.median(
        np.asarray(X[:, :70].sum(axis=1)).ravel()), 1, -1)
    monkeypatch.setattr("solver.msvmav.fit_threads", lambda: 1)
    one = MSVMAv(linear_solver=solver, max_iter=30).fit(X, y)
    monkeypatch.setattr("solver.msvmav.fit_threads", lambda: 3)
    three = MSVMAv(linear_solver=solver, max_iter=30).fit(X, y)
    assert one.n_iter_ == three.n_iter_ == 30
    assert np.max(np.abs(one.decision_function(X) - three.decision_function(X))) < 1e-12


def _in_child(queue) -> None:
    queue.put(run_parallel(lambda k: k * k, [1, 2, 3]))


def test_a_forked_child_gets_a_pool_of_its_own():
    """The pool's threads do not survive fork(): without a new pool the child's first
    parallel product would wait forever."""
    assert run_parallel(lambda k: k + 1, [1, 2]) == [2, 3]  # the parent's pool exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(queue,))
    child.start()
    child.join(timeout=30)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0
    assert queue.get(timeout=5) == [1, 4, 9]
