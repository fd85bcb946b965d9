"""solver.memory.estimate_fit: it follows the path fit() takes, grows with the data, is close to
the peak tracemalloc measures (numpy/scipy paths; LIBLINEAR's and LIBSVM's own allocations are
invisible to tracemalloc, bench/fit_memory.py measures them by RSS), and fit() refuses a fit
above the limit before allocating anything proportional to it."""

import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import sparse

from solver import ALGORITHMS, MSVMAv
from solver.internals import BASE_BYTES
from solver.memory import FitTooLarge, estimate_fit, memory_limit

KERNELS = ["linear", "rbf"]


def data(n, d, per_row=None, seed=0):
    rng = np.random.default_rng(seed)
    if per_row is None:
        X = rng.random((n, d))
    else:
        cols = np.sort(rng.integers(0, d, size=(n, per_row)), axis=1)
        X = sparse.csr_matrix((rng.random(n * per_row), cols.ravel(),
                               np.arange(0, n * per_row + 1, per_row)), shape=(n, d))
        X.sum_duplicates()
    y = np.where(rng.random(n) < 0.5, 1, -1)
    y[:2] = [1, -1]
    return X, y


def measured_peak(est, X, y) -> int:
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


PARAMS = [("msvmav", {"linear_solver": s}) for s in ("dense", "woodbury", "cg", "gram")] + [
    (a, {"kernel": k}) for a in ALGORITHMS for k in KERNELS]


@pytest.mark.parametrize("algorithm,params", PARAMS)
def test_estimate_grows_with_rows_features_and_stored_values(algorithm, params):
    """On one path: more rows, more (dense) features or more stored values never need less.
    (Across paths it may: the automatic choice moves to a smaller path as D grows; and at a
    fixed number of stored values a wider CSR matrix has a sparser X X^T.)"""
    def est(n, d, nnz=None):
        return estimate_fit(algorithm, n, d, nnz, params).peak_bytes

    for n in (2000, 20_000):
        assert est(2 * n, 500) >= est(n, 500) > 0
        assert est(n, 5000) >= est(n, 500)
        assert est(2 * n, 5000, 40 * n) >= est(n, 5000, 20 * n)
        assert est(n, 5000, 40 * n) >= est(n, 5000, 20 * n) > 0
    assert estimate_fit(algorithm, 500, 50, None, params, n_classes=4).peak_bytes >= est(500, 50)


@pytest.mark.parametrize("n,d,per_row", [(300, 20, None), (60, 2000, None), (60, 2000, 30),
                                         (3000, 1000, 10), (1500, 700, 150)])
def test_estimate_names_the_linear_path_fit_takes(n, d, per_row):
    X, y = data(n, d, per_row)
    m = MSVMAv(max_iter=2).fit(X, y)
    assert estimate_fit("msvmav", n, d, X.nnz if per_row else None, {}).path == m.linear_solver_
    for solver in ("dense", "woodbury", "cg", "gram"):
        assert estimate_fit("msvmav", n, d, None, {"linear_solver": solver}).path == solver


def test_estimate_names_the_kernel_path_fit_takes():
    X, y = data(1500, 5)
    names = {"exact": "exact-kernel", "low_rank": "low-rank", "nystroem": "nystroem"}
    for params in ({}, {"approximation": "exact"}, {"approximation": "nystroem",
                                                     "n_components": 50}):
        m = MSVMAv(kernel="rbf", max_iter=2, random_state=0, **params).fit(X, y)
        est = estimate_fit("msvmav", 1500, 5, None, {"kernel": "rbf", **params})
        assert est.path == names[m.kernel_approximation_]
    assert estimate_fit("msvmav", 500, 5, None, {"kernel": "rbf"}).path == "exact-kernel"


CASES = [
    ("msvmav", {}, 30, 12000, None),  # woodbury: the 30 x 12,000 CSV of issue 20
    ("msvmav", {}, 1000, 20000, 50),  # cg
    ("msvmav", {}, 20000, 1000, 50),  # gram, G built by one sparse product
    ("msvmav", {}, 50000, 1000, 50),  # gram, G built in one piece a thread (A: > 2^20 values)
    ("msvmav", {}, 3000, 800, None),  # gram, G built from densified blocks
    ("msvmav", {"linear_solver": "dense"}, 200, 1000, None),
    ("msvmav", {"linear_solver": "woodbury"}, 300, 5000, 50),
    ("msvmav", {"kernel": "rbf"}, 800, 10, None),  # exact kernel
    ("msvmav", {"kernel": "rbf", "approximation": "nystroem", "n_components": 200}, 3000, 10,
     None),
    ("lssvm", {}, 1500, 40, None), ("lssvm", {"kernel": "rbf"}, 1500, 40, None),
    ("lssvm", {}, 2000, 5000, 20), ("odm", {}, 2000, 5000, 20),
    ("odm", {"kernel": "rbf"}, 1500, 40, None), ("fmm", {"kernel": "rbf"}, 1500, 40, None),
    ("fmm", {}, 1500, 40, None), ("mamc", {"kernel": "rbf"}, 1500, 40, None),
]


@pytest.mark.parametrize("algorithm,params,n,d,per_row", CASES)
def test_estimate_is_within_half_again_of_the_measured_peak(algorithm, params, n, d, per_row):
    X, y = data(n, d, per_row)
    estimate = estimate_fit(algorithm, n, d, None if per_row is None else X.nnz, params)
    peak = measured_peak(ALGORITHMS[algorithm](**params), X, y)
    # tracemalloc sees only Python's allocations: not the BLAS buffers and modules of BASE_BYTES
    arrays = estimate.peak_bytes - BASE_BYTES
    assert peak / 1.5 <= arrays <= 1.5 * peak, (estimate, peak)


@pytest.mark.parametrize("algorithm,params", [
    ("lssvm", {"kernel": "rbf"}), ("odm", {"kernel": "rbf"}), ("fmm", {"kernel": "rbf"}),
    ("lssvm", {}), ("msvmav", {"kernel": "rbf", "approximation": "exact"}),
    ("msvmav", {"linear_solver": "dense"}), ("svm", {"kernel": "rbf"})])
def test_fit_refuses_before_allocating(algorithm, params):
    """An n x n (or D x D) fit above the limit raises FitTooLarge, having allocated next to
    nothing: the refusal comes before the matrix."""
    X, y = data(3000, 3000, 5)
    limit = 8 * 3000 * 3000 // 4  # a quarter of one 3000 x 3000 matrix
    est = ALGORITHMS[algorithm](**params)
    with memory_limit(limit), pytest.raises(FitTooLarge) as info:
        peak = measured_peak(est, X, y)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.limit == limit and err.estimate.peak_bytes > limit
    assert "GiB" in str(err) or "MiB" in str(err)
    assert err.estimate.advice in str(err)
    tracemalloc.start()
    try:
        with memory_limit(limit), pytest.raises(FitTooLarge):
            est.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit / 4


def test_the_issue_20_shapes_now_fit_in_little_memory():
    """1,000 x 100,000 sparse failed with a 74.5 GiB MemoryError; 30 x 12,000 dense took
    3.7 GB. Both now take the paths that need O(nnz + n + D) or O(n^2)."""
    X, y = data(1000, 100_000, 50)
    est = estimate_fit("msvmav", 1000, 100_000, X.nnz, {})
    assert est.path == "cg" and est.peak_bytes < 50 * 2**20
    peak = measured_peak(MSVMAv(max_iter=10), X, y)
    assert peak <= 1.5 * est.peak_bytes
    dense = estimate_fit("msvmav", 30, 12_000, None, {})
    assert dense.path == "woodbury" and dense.peak_bytes < 10 * 2**20
    assert estimate_fit("msvmav", 1000, 100_000, X.nnz,
                        {"linear_solver": "dense"}).peak_bytes > 70 * 2**30


def test_unknown_algorithm_or_parameter_is_a_value_error():
    with pytest.raises(ValueError, match="algorithm"):
        estimate_fit("nope", 10, 10, None, {})
    with pytest.raises(ValueError, match="linear_solver"):
        estimate_fit("msvmav", 10, 10, None, {"linear_solver": "qr"})
