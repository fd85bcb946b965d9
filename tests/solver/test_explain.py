"""Per-row contributions (solver.explain): exact for linear models, closed-form integrated
gradients for RBF (checked against numerical quadrature of the analytic gradient computed
here), Gauss-Legendre for polynomial kernels; completeness within 1e-6 (measured far below) for
linear, RBF exact, low-rank and Nystroem, comparators and multi-class; baselines, bounds and
permutation importance."""

import numpy as np
import pytest
from scipy import integrate, sparse
from sklearn.datasets import make_classification
from sklearn.inspection import permutation_importance as sk_permutation_importance
from sklearn.preprocessing import MinMaxScaler

from solver import FMM, LSSVM, MAMC, ODM, SVM, MSVMAv, model_from_dict
from solver.explain import contributions, explain_work, permutation_importance

COMPLETE = 1e-6  # the bound; measured errors are ~1e-14


def make_data(n=200, d=5, classes=2, seed=0):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=min(d, 4),
                               n_redundant=0, n_classes=classes, n_clusters_per_class=1,
                               flip_y=0.05, random_state=seed)
    return MinMaxScaler().fit_transform(X), y


MODELS = {
    "msvmav-linear": MSVMAv(),
    "msvmav-rbf-exact": MSVMAv(kernel="rbf", gamma=3.0),
    "msvmav-rbf-low_rank": MSVMAv(kernel="rbf", approximation="low_rank", random_state=0),
    "msvmav-rbf-nystroem": MSVMAv(kernel="rbf", approximation="nystroem", n_components=30,
                                  random_state=0),
    "msvmav-poly": MSVMAv(kernel="poly", degree=3, max_iter=20),
    "svm-rbf": SVM(kernel="rbf"),  # a free bias: baseline_decision carries it
    "lssvm-poly": LSSVM(kernel="poly", degree=4),
    "odm-linear": ODM(random_state=0),
    "mamc-rbf": MAMC(kernel="rbf"),
    "fmm-linear": FMM(n_iter=20),
}


def assert_complete(est, X, exp):
    D = est.decision_function(X)
    total = exp.baseline_decision + exp.values.sum(axis=1)
    np.testing.assert_allclose(total, D, atol=COMPLETE, rtol=0)
    assert exp.completeness_error == pytest.approx(np.max(np.abs(total - D)), abs=1e-15)
    assert exp.completeness_error < 1e-10


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_contributions_are_complete(name, classes):
    X, y = make_data(classes=classes)
    est = MODELS[name].fit(X, y)
    X_new, _ = make_data(n=50, classes=classes, seed=7)
    exp = contributions(est, X_new)
    T = 1 if classes == 2 else classes
    assert exp.values.shape == ((50, 5) if T == 1 else (50, 5, T))
    np.testing.assert_array_equal(exp.baseline, est.feature_means_)
    np.testing.assert_allclose(exp.baseline_decision,
                               est.decision_function(est.feature_means_[None, :])[0])
    assert_complete(est, X_new, exp)


def test_linear_contributions_are_exactly_w_times_x_minus_baseline():
    X, y = make_data(classes=3)
    est = MSVMAv().fit(X, y)
    b = np.full(5, 0.25)
    exp = contributions(est, X[:20], baseline=b)
    assert exp.method == "linear"
    for t in range(3):
        np.testing.assert_allclose(exp.values[:, :, t], est.coef_[t] * (X[:20] - b),
                                   rtol=0, atol=1e-15)


def _numerical_ig(est, x, b):
    """Integrated gradients by adaptive quadrature of the RBF expansion's analytic gradient."""
    Z, A, g = est.X_fit_, est.dual_coef_, est.gamma_

    def grad(p):
        k = np.exp(-g * ((p - Z) ** 2).sum(axis=1))
        return -2.0 * g * (k * A) @ (p - Z)

    d = x - b
    return integrate.quad_vec(lambda t: grad(b + t * d), 0, 1, epsabs=1e-14,
                              epsrel=1e-13)[0] * d


@pytest.mark.parametrize("gamma", [0.2, 3.0, 40.0])
def test_rbf_closed_form_equals_quadrature_of_the_analytic_gradient(gamma):
    X, y = make_data()
    est = MSVMAv(kernel="rbf", gamma=gamma).fit(X, y)
    rows = np.vstack([X[:4], est.feature_means_ + 1e-7,  # a row next to the baseline
                      np.ones(5) * 1.5])  # one outside the training range
    exp = contributions(est, rows)
    assert exp.method == "integrated-gradients-rbf"
    for r in range(rows.shape[0]):
        np.testing.assert_allclose(exp.values[r], _numerical_ig(est, rows[r], exp.baseline),
                                   rtol=0, atol=1e-10)
    assert_complete(est, rows, exp)


def test_the_baseline_row_gets_zero_contributions():
    X, y = make_data()
    est = MSVMAv(kernel="rbf").fit(X, y)
    exp = contributions(est, est.feature_means_[None, :])
    np.testing.assert_array_equal(exp.values, 0.0)


def test_poly_needs_only_ceil_degree_over_two_nodes_more_change_nothing():
    # gamma 1/d: the nodes' exactness is visible at 1e-12. At "scale" (1/(d Var X) = 5.9 here)
    # the gradient's terms reach 1.7e7 and their sums to values of ~1 round at 1e-10, as the
    # model's own decision values do (completeness error 1.3e-9): rounding, not quadrature.
    X, y = make_data()
    est = LSSVM(kernel="poly", degree=5, gamma="auto").fit(X, y)
    exact = contributions(est, X[:10]).values
    np.testing.assert_allclose(contributions(est, X[:10], steps=12).values, exact,
                               rtol=0, atol=1e-12)


def test_sparse_rows_explained_as_dense():
    X, y = make_data()
    est = MSVMAv(kernel="rbf").fit(X, y)
    dense = contributions(est, X[:30]).values
    np.testing.assert_allclose(contributions(est, sparse.csr_matrix(X[:30])).values, dense,
                               rtol=0, atol=1e-14)


def test_restored_model_explains_the_same():
    X, y = make_data(classes=3)
    est = MSVMAv(kernel="rbf", approximation="low_rank", random_state=0).fit(X, y)
    restored = model_from_dict(est.to_dict())
    np.testing.assert_array_equal(contributions(restored, X[:10]).values,
                                  contributions(est, X[:10]).values)


def test_bad_baselines_and_kernels_are_refused_with_their_name():
    X, y = make_data()
    est = MSVMAv().fit(X, y)
    with pytest.raises(ValueError, match="baseline: expected 5 finite values"):
        contributions(est, X[:2], baseline=np.zeros(4))
    with pytest.raises(ValueError, match="baseline: expected 5 finite values"):
        contributions(est, X[:2], baseline=np.full(5, np.nan))
    est.feature_means_ = None  # as a model saved before feature means were kept
    with pytest.raises(ValueError, match="baseline: the model has no stored training means"):
        contributions(est, X[:2])
    pre = MSVMAv(kernel="precomputed").fit(X @ X.T, y)
    with pytest.raises(ValueError, match="kernel: a 'precomputed' model cannot be explained"):
        contributions(pre, X[:2] @ X.T)


def test_explain_work_bounds_grow_with_rows_and_the_expansion():
    X, y = make_data(classes=3)
    linear = MSVMAv().fit(X, y)
    rbf = MSVMAv(kernel="rbf").fit(X, y)
    assert explain_work(linear, 10) == 10 * 5 * 3
    m = rbf.X_fit_.shape[0]
    assert explain_work(rbf, 10) == 10 * m * 5 * 4
    assert explain_work(rbf, 20) == 2 * explain_work(rbf, 10)
    poly = LSSVM(kernel="poly", degree=5).fit(X, y)
    assert explain_work(poly, 10, steps=None) == 3 * 10 * poly.X_fit_.shape[0] * 5 * 4


def test_permutation_importance_is_sklearns_without_groups():
    X, y = make_data()
    est = MSVMAv().fit(X, y)
    ours = permutation_importance(est, X, y, n_repeats=3, random_state=0)
    ref = sk_permutation_importance(est, X, y, n_repeats=3, random_state=0)
    np.testing.assert_array_equal(ours["importances"], ref["importances"])


def test_grouped_permutation_shuffles_the_group_together():
    X, y = make_data()
    X = np.hstack([X, np.full((X.shape[0], 1), 0.5)])  # a constant column: importance 0
    est = MSVMAv().fit(X, y)
    groups = [[0, 1], [2], [3, 4], [5]]
    ours = permutation_importance(est, X, y, groups=groups, n_repeats=4, random_state=3)
    assert ours["importances"].shape == (4, 4)
    np.testing.assert_array_equal(ours["importances"][3], 0.0)
    # independently: the same row permutations applied by hand
    rng = np.random.RandomState(3)
    base = est.score(X, y)
    for g, cols in enumerate(groups):
        for r in range(4):
            Xp = X.copy()
            Xp[:, cols] = X[rng.permutation(X.shape[0])][:, cols]
            assert ours["importances"][g, r] == pytest.approx(base - est.score(Xp, y))
