"""The adaptive low-rank kernel path: the pivoted Cholesky factor against the kernel matrix
computed independently, and approximation="auto" against the exact kernel path."""

import numpy as np
import pytest
from scipy import linalg
from sklearn.datasets import make_classification
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel
from sklearn.preprocessing import MinMaxScaler

import solver.msvmav as msvmav_module
from solver import MSVMAv, model_from_dict
from solver.low_rank import pivoted_cholesky


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=700, n_features=8, n_informative=5, random_state=3)
    X = MinMaxScaler().fit_transform(X)
    return X[:500], y[:500], X[500:], y[500:]


@pytest.fixture
def auto_low_rank(monkeypatch):
    """approximation="auto" takes the low-rank path from 100 rows on (instead of 1,024)."""
    monkeypatch.setattr(msvmav_module, "AUTO_EXACT_ROWS", 100)


def relative(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("tol", [1e-2, 1e-4, 1e-8])
def test_factor_meets_the_trace_tolerance_and_reports_its_error(data, tol):
    X = data[0]
    f = pivoted_cholesky(X, kernel="rbf", gamma=0.5, tol=tol, random_state=0)
    K = rbf_kernel(X, gamma=0.5)
    L = f.factor.T
    error = np.trace(K - L @ L.T) / np.trace(K)
    assert f.error == pytest.approx(error, rel=1e-6, abs=1e-13)
    assert error <= tol
    # the residual of a pivoted Cholesky factor is positive semi-definite
    assert np.linalg.eigvalsh(K - L @ L.T).min() > -1e-10
    assert 0 < f.rank < X.shape[0] and len(set(f.pivots.tolist())) == f.rank
    # exact on the pivot columns, and L_PP is lower triangular in pivot order
    assert np.allclose(L @ L[f.pivots].T, K[:, f.pivots], atol=1e-10)
    assert np.allclose(f.pivot_block(), np.tril(f.pivot_block()))
    # the rank is close to the smallest prefix meeting the target: one pivot fewer does not
    fewer = np.trace(K - L[:, :-1] @ L[:, :-1].T) / np.trace(K)
    assert fewer > tol


def test_factor_of_a_polynomial_kernel_and_the_rank_cap(data):
    X = data[0]
    f = pivoted_cholesky(X, kernel="poly", gamma=0.5, degree=2, coef0=1.0, tol=0.0,
                         random_state=1)
    K = polynomial_kernel(X, degree=2, gamma=0.5, coef0=1.0)
    L = f.factor.T
    # a degree-2 kernel on 8 features has rank at most (8 + 1)(8 + 2) / 2 = 45
    assert f.rank <= 45 and np.abs(K - L @ L.T).max() < 1e-8 * np.abs(K).max()
    capped = pivoted_cholesky(X, kernel="rbf", gamma=0.5, tol=0.0, max_rank=7, random_state=0)
    K = rbf_kernel(X, gamma=0.5)
    L = capped.factor.T
    assert capped.rank == 7
    assert capped.error == pytest.approx(np.trace(K - L @ L.T) / np.trace(K), rel=1e-8)


def test_auto_above_the_crossover_is_low_rank_within_the_stated_tolerance(data, auto_low_rank):
    """Default kernel_tol = 1e-6: decisions within 1e-3 (relative, max norm) of the exact
    model, on the training rows and on rows the model has not seen."""
    X, y, Xt, _ = data
    exact = MSVMAv(kernel="rbf", gamma="auto", approximation="exact").fit(X, y)
    auto = MSVMAv(kernel="rbf", gamma="auto", random_state=0).fit(X, y)
    assert auto.kernel_approximation_ == "low_rank"
    assert 0 < auto.rank_ < X.shape[0] / 4 and auto.X_fit_.shape == (auto.rank_, 8)
    assert 0 < auto.kernel_error_ <= 1e-6
    assert auto.fit_info_["pivots"] >= auto.rank_
    for rows in (X, Xt):
        assert relative(auto.decision_function(rows), exact.decision_function(rows)) < 1e-3
    assert np.mean(auto.predict(Xt) == exact.predict(Xt)) >= 0.99
    # the model is an expansion over the pivot rows: f(x) = k(x, X_P) @ dual_coef_
    assert np.allclose(auto.decision_function(Xt),
                       rbf_kernel(Xt, auto.X_fit_, gamma=1 / 8) @ auto.dual_coef_, rtol=1e-12)


def test_error_of_decisions_shrinks_with_the_kernel_tolerance(data):
    X, y, Xt, _ = data
    exact = MSVMAv(kernel="rbf", gamma="auto", approximation="exact").fit(X, y)
    exact = exact.decision_function(Xt)
    errors, ranks = [], []
    for tol in (1e-2, 1e-4, 1e-6):
        m = MSVMAv(kernel="rbf", gamma="auto", approximation="low_rank", kernel_tol=tol,
                   random_state=0).fit(X, y)
        errors.append(relative(m.decision_function(Xt), exact))
        ranks.append(m.rank_)
    assert ranks == sorted(ranks) and errors == sorted(errors, reverse=True)
    assert errors[-1] < 1e-4


def test_low_rank_with_zero_tolerance_reproduces_the_exact_iterates(data):
    X, y, Xt, _ = data
    exact = MSVMAv(kernel="rbf", gamma=0.5, max_iter=30, tol=0,
                   approximation="exact").fit(X, y)
    # a budget just too small for the exact kernel (4 n^2 floats), so no fallback
    budget = 3.9 * 8 * X.shape[0] ** 2 / 2**20
    full = MSVMAv(kernel="rbf", gamma=0.5, max_iter=30, tol=0, approximation="low_rank",
                  kernel_tol=0.0, kernel_memory_mb=budget, random_state=0).fit(X, y)
    assert full.kernel_approximation_ == "low_rank" and full.kernel_error_ < 1e-12
    assert relative(full.decision_function(Xt), exact.decision_function(Xt)) < 1e-8
    assert [h["active"] for h in full.history_] == [h["active"] for h in exact.history_]


def test_auto_on_a_kernel_with_no_small_rank_takes_the_exact_kernel_where_it_is_cheaper(
        data, auto_low_rank):
    """A narrow kernel (gamma = 200) is nearly diagonal: no small rank meets the tolerance,
    and no fixed rank matches I + K (the residual keeps eigenvalues near 1). Auto pivots until
    the pivots have cost as much as the exact kernel would (issue 30's cost model), then takes
    the exact kernel, which fits the memory budget here, and records why; only a memory budget
    that the exact kernel does not fit keeps it low-rank (below)."""
    X, y, Xt, _ = data
    auto = MSVMAv(kernel="rbf", gamma=200.0, max_iter=20, n_components=20,
                  random_state=0).fit(X, y)
    exact = MSVMAv(kernel="rbf", gamma=200.0, max_iter=20, approximation="exact").fit(X, y)
    assert auto.kernel_approximation_ == "exact" and auto.fit_info_["rank_choice"] == "exact"
    assert "costs as much as the exact kernel" in auto.fit_info_["fallback"]
    assert np.array_equal(auto.decision_function(Xt), exact.decision_function(Xt))
    forced = MSVMAv(kernel="rbf", gamma=200.0, max_iter=20, approximation="low_rank",
                    random_state=0).fit(X, y)
    assert forced.kernel_approximation_ == "exact" and "fallback" in forced.fit_info_
    assert forced.rank_ == X.shape[0] and forced.kernel_error_ == 0.0
    assert np.array_equal(forced.decision_function(Xt), exact.decision_function(Xt))
    # a memory budget caps auto's rank: it stays low-rank and says which knob to turn
    with pytest.warns(UserWarning, match="raise kernel_memory_mb"):
        tight = MSVMAv(kernel="rbf", gamma=200.0, max_iter=20, kernel_memory_mb=2.0,
                       random_state=0).fit(X, y)
    assert tight.kernel_approximation_ == "low_rank" and "fallback" not in tight.fit_info_
    cap = int(2.0 * 2**20 / (msvmav_module.LOW_RANK_ARRAYS * 8 * X.shape[0]))
    assert tight.rank_ <= cap and tight.kernel_error_ > 1e-6
    # an explicit low_rank without room for the exact kernel is capped by n_components
    with pytest.warns(UserWarning, match="raise n_components"):
        few = MSVMAv(kernel="rbf", gamma=200.0, max_iter=5, kernel_memory_mb=2.0,
                     approximation="low_rank", n_components=20, random_state=0).fit(X, y)
    assert few.rank_ <= 20 and few.kernel_approximation_ == "low_rank"
    L_rows = rbf_kernel(X, tight.X_fit_, gamma=200.0)
    assert np.isfinite(tight.decision_function(Xt)).all() and L_rows.shape[1] == tight.rank_


def test_auto_accuracy_is_close_to_the_exact_kernel_on_a_moderate_problem(auto_low_rank):
    """2,000 training rows: auto (low-rank, as above the threshold) against the exact kernel
    on a held-out set."""
    X, y = make_classification(n_samples=3000, n_features=10, n_informative=6, flip_y=0.05,
                               random_state=7)
    X = MinMaxScaler().fit_transform(X)
    Xtr, ytr, Xte, yte = X[:2000], y[:2000], X[2000:], y[2000:]
    exact = MSVMAv(kernel="rbf", gamma="auto", approximation="exact").fit(Xtr, ytr)
    auto = MSVMAv(kernel="rbf", gamma="auto", random_state=0).fit(Xtr, ytr)
    assert auto.kernel_approximation_ == "low_rank"
    assert abs(auto.score(Xte, yte) - exact.score(Xte, yte)) <= 0.01


def test_small_data_and_many_landmarks_use_the_exact_kernel(data):
    X, y, _, _ = data
    assert MSVMAv(kernel="rbf", gamma="auto", max_iter=5).fit(X, y).kernel_approximation_ == "exact"
    many = MSVMAv(kernel="rbf", gamma="auto", max_iter=5, approximation="nystroem",
                  n_components=200,
                  random_state=0).fit(X, y)
    assert many.kernel_approximation_ == "exact"
    few = MSVMAv(kernel="rbf", gamma="auto", max_iter=5, approximation="nystroem", n_components=50,
                 random_state=0).fit(X, y)
    assert few.kernel_approximation_ == "nystroem" and few.rank_ <= 50
    K = rbf_kernel(X, gamma=1 / 8)
    Kxl = rbf_kernel(X, few.X_fit_, gamma=1 / 8)
    approx = Kxl @ np.linalg.pinv(rbf_kernel(few.X_fit_, gamma=1 / 8), hermitian=True) @ Kxl.T
    assert few.kernel_error_ == pytest.approx(np.trace(K - approx) / np.trace(K), rel=1e-4)


def test_low_rank_multiclass_and_persistence(data, auto_low_rank):
    X, _, Xt, _ = data
    y3 = np.digitize(X[:, 0] + X[:, 1], [0.7, 1.1])
    m = MSVMAv(kernel="rbf", gamma="auto", max_iter=15, random_state=0).fit(X, y3)
    assert m.kernel_approximation_ == "low_rank" and m.dual_coef_.shape == (m.rank_, 3)
    d = m.to_dict()
    assert d["meta"]["attributes"]["rank_"] == m.rank_
    restored = model_from_dict(d)
    assert restored.rank_ == m.rank_ and restored.kernel_error_ == m.kernel_error_
    assert np.array_equal(restored.decision_function(Xt), m.decision_function(Xt))


def test_precomputed_kernels_cannot_be_factored(data):
    X, y, _, _ = data
    K = rbf_kernel(X)
    with pytest.raises(ValueError, match="approximation: 'low_rank' needs feature rows"):
        MSVMAv(kernel="precomputed", approximation="low_rank").fit(K, y)
    m = MSVMAv(kernel="precomputed", max_iter=5).fit(K, y)
    assert m.kernel_approximation_ == "exact" and m.rank_ == X.shape[0]


def test_pivot_block_solve_matches_the_factor_on_training_rows(data):
    """phi(x) = L_PP^{-1} k(X_P, x) reproduces the factor's rows (the Nystroem identity)."""
    X = data[0]
    f = pivoted_cholesky(X, kernel="rbf", gamma=1.0, tol=1e-6, random_state=2)
    phi = linalg.solve_triangular(f.pivot_block(), rbf_kernel(X[f.pivots], X, gamma=1.0),
                                  lower=True)
    assert np.allclose(phi, f.factor, atol=1e-8)
