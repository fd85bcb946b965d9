"""Class and sample weights of MSVMAv (docs/algorithm.md, "Weights"): the weighted iterates
against a naive dense implementation written here from the derivation, unit weights against
today's iterates, and the weights' checks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics.pairwise import rbf_kernel

from solver import MSVMAv
from solver.internals import DualSpace, PrimalSpace, WeightedDualSpace, WeightedPrimalSpace, iterate
from solver.msvmav import augment
from solver.weights import fit_weights

ALPHA, BETA, T = 2.0, 0.5, 25
# every fit here runs its T iterations (tol 0)
pytestmark = pytest.mark.filterwarnings("ignore:the fit did not converge")


def _data(n=70, d=4, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    score = X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y, rng.random(n) * 3 + 0.05


def _targets(y):
    classes = np.unique(y)
    if classes.size == 2:
        return [np.where(y == classes[1], 1.0, -1.0)]
    return [np.where(y == c, 1.0, -1.0) for c in classes]


def naive_linear(Xa, y, v, alpha=ALPHA, beta=BETA, T=T):
    """Weighted linear MSVMAv from scratch: each step's D x D system formed and solved."""
    W, D = v.sum(), Xa.shape[1]
    s = Xa.T @ (v * y)
    w = s / np.linalg.norm(s)
    thetas, svs = [], []
    for _ in range(T):
        m = y * (Xa @ w)
        theta = v @ m / W
        A = m < theta
        XA, vA = Xa[A], v[A]
        H = W * beta * np.eye(D) + XA.T @ (vA[:, None] * XA)
        wp = np.linalg.solve(H, W * beta * w + theta * XA.T @ (vA * y[A]))
        if (v * y) @ (Xa @ wp) < 0:
            wp = -wp
        w = wp + s / (2 * alpha * W)
        w /= np.linalg.norm(w)
        m = y * (Xa @ w)
        theta = v @ m / W
        thetas.append(theta)
        svs.append(v @ np.maximum(theta - m, 0.0) ** 2 / W)
    return w, np.array(thetas), np.array(svs)


def naive_kernel(K, y, v, alpha=ALPHA, beta=BETA, T=T):
    """Weighted kernel MSVMAv from scratch: the n x n system (W beta (I + K) +
    K_{:,A} V_A K_{A,:}) a = W beta (I + K) a_prev + theta K_{:,A} V_A y_A each step."""
    n, W = K.shape[0], v.sum()
    B = np.eye(n) + K
    a = v * y / np.sqrt((v * y) @ K @ (v * y))
    thetas, svs = [], []
    for _ in range(T):
        m = y * (K @ a)
        theta = v @ m / W
        A = m < theta
        KA = K[:, A]
        H = W * beta * B + KA @ (v[A][:, None] * KA.T)
        ap = np.linalg.solve(H, W * beta * B @ a + theta * KA @ (v[A] * y[A]))
        if (v * y) @ (K @ ap) < 0:
            ap = -ap
        a = ap + v * y / (2 * alpha * W)
        a /= np.sqrt(a @ K @ a)
        m = y * (K @ a)
        theta = v @ m / W
        thetas.append(theta)
        svs.append(v @ np.maximum(theta - m, 0.0) ** 2 / W)
    return a, np.array(thetas), np.array(svs)


def _fit(X, y, v, **kw):
    return MSVMAv(ALPHA, BETA, max_iter=T, tol=0.0, stop="step", **kw).fit(X, y, sample_weight=v)


def _history(model, task):
    rows = [h for h in model.history_ if h["task"] == task]
    return (np.array([h["theta"] for h in rows]), np.array([h["semivariance"] for h in rows]))


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("solver", ["dense", "woodbury", "cg", "gram"])
def test_weighted_linear_iterates_equal_the_naive_ones(classes, solver):
    X, y, v = _data(classes=classes)
    model = _fit(X, y, v, linear_solver=solver)
    Xa = augment(X)
    for t, target in enumerate(_targets(y)):
        w, thetas, svs = naive_linear(Xa, target, v)
        got = np.r_[model.coef_[t], model.intercept_[t]]
        np.testing.assert_allclose(got, w, rtol=0, atol=1e-10)
        theta, sv = _history(model, t)
        np.testing.assert_allclose(theta, thetas, rtol=0, atol=1e-10)
        np.testing.assert_allclose(sv, svs, rtol=0, atol=1e-10)


def test_weighted_sparse_rows_give_the_dense_iterates():
    X, y, v = _data()
    X[X < 0.3] = 0.0
    dense = _fit(X, y, v)
    csr = _fit(sparse.csr_matrix(X), y, v)
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=0, atol=1e-12)


@pytest.mark.parametrize("classes", [2, 3])
def test_weighted_exact_kernel_iterates_equal_the_naive_ones(classes):
    X, y, v = _data(classes=classes)
    model = _fit(X, y, v, kernel="rbf", gamma=0.5, approximation="exact")
    K = rbf_kernel(X, gamma=0.5)
    dual = model.dual_coef_.reshape(X.shape[0], -1)
    for t, target in enumerate(_targets(y)):
        a, thetas, svs = naive_kernel(K, target, v)
        np.testing.assert_allclose(dual[:, t], a, rtol=0, atol=1e-10)
        theta, sv = _history(model, t)
        np.testing.assert_allclose(theta, thetas, rtol=0, atol=1e-10)
        np.testing.assert_allclose(sv, svs, rtol=0, atol=1e-10)


def test_weighted_low_rank_kernel_runs_the_naive_iteration_on_the_factored_kernel():
    X, y, v = _data(n=90)
    model = _fit(X, y, v, kernel="rbf", gamma=0.2, approximation="low_rank", kernel_tol=1e-3)
    assert model.kernel_approximation_ == "low_rank"
    P = [int(np.flatnonzero(np.all(row == X, axis=1))[0]) for row in model.X_fit_]
    K = rbf_kernel(X, gamma=0.2)
    Kr = K[:, P] @ np.linalg.solve(K[np.ix_(P, P)], K[P, :])  # the pivots' Nystroem kernel
    Kr = (Kr + Kr.T) / 2
    a, thetas, svs = naive_kernel(Kr, _targets(y)[0], v)
    np.testing.assert_allclose(model.decision_function(X), Kr @ a, rtol=0, atol=1e-9)
    theta, sv = _history(model, 0)
    np.testing.assert_allclose(theta, thetas, rtol=0, atol=1e-9)
    np.testing.assert_allclose(sv, svs, rtol=0, atol=1e-9)


@pytest.mark.parametrize("kw", [{}, {"kernel": "rbf", "approximation": "exact"},
                                {"kernel": "rbf", "approximation": "low_rank"}])
def test_unit_weights_reproduce_the_unweighted_fit_exactly(kw):
    X, y, _ = _data(classes=3)
    plain = MSVMAv(ALPHA, BETA, max_iter=T, tol=0.0, stop="step", **kw).fit(X, y)
    for weights in (np.ones(y.size), np.full(y.size, 2.5)):
        weighted = MSVMAv(ALPHA, BETA, max_iter=T, tol=0.0, stop="step", **kw).fit(X, y,
                                                                      sample_weight=weights)
        np.testing.assert_allclose(weighted.decision_function(X), plain.decision_function(X),
                                   rtol=0, atol=1e-12)
        assert [h["theta"] for h in weighted.history_] == [h["theta"] for h in plain.history_]


def test_weighted_spaces_at_unit_weights_give_todays_iterates():
    """The weighted spaces themselves (not only the shortcut past them) reduce to today's."""
    X, y, _ = _data()
    target = _targets(y)[0]
    ones = np.ones(y.size)
    Xa = augment(X)
    runs = {}
    for name, space in {
        "primal": PrimalSpace(Xa, target, BETA, shift=Xa.T @ target, solver="dense"),
        "weighted primal": WeightedPrimalSpace(Xa, target, ones, BETA, shift=Xa.T @ target,
                                               solver="dense"),
    }.items():
        runs[name] = iterate(space, target, alpha=ALPHA, max_iter=T, tol=0.0, stop="step")
    K = rbf_kernel(X, gamma=0.5)
    pair = DualSpace.__init__.__globals__["DualSystem"].pair(K)
    runs["dual"] = iterate(DualSpace(pair, target, BETA), target, alpha=ALPHA, max_iter=T,
                           tol=0.0, stop="step")
    runs["weighted dual"] = iterate(WeightedDualSpace(pair, target, ones, BETA), target,
                                    alpha=ALPHA, max_iter=T, tol=0.0, stop="step")
    for plain, weighted in (("primal", "weighted primal"), ("dual", "weighted dual")):
        np.testing.assert_allclose(runs[weighted][0], runs[plain][0], rtol=0, atol=1e-12)
        for a, b in zip(runs[weighted][2], runs[plain][2], strict=True):
            assert abs(a["theta"] - b["theta"]) <= 1e-12
            assert abs(a["semivariance"] - b["semivariance"]) <= 1e-12
            assert a["active"] == b["active"]


def test_class_weight_is_the_sample_weight_of_its_classes():
    X, y, _ = _data()
    mapping = {0: 3.0, 1: 0.5}
    by_class = MSVMAv(ALPHA, BETA, max_iter=T, tol=0.0, stop="step", class_weight=mapping).fit(X, y)
    by_row = _fit(X, y, np.where(y == 0, 3.0, 0.5))
    np.testing.assert_array_equal(by_class.coef_, by_row.coef_)
    as_json = MSVMAv(ALPHA, BETA, max_iter=T, tol=0.0, stop="step",
                     class_weight={"0": 3.0, "1": 0.5})
    np.testing.assert_array_equal(as_json.fit(X, y).coef_, by_row.coef_)
    balanced = fit_weights("balanced", None, y)
    counts = np.bincount(y)
    expected = y.size / (2 * counts[y]) if counts[0] != counts[1] else None
    assert (balanced is None) == (expected is None)


def test_zero_weights_leave_their_rows_out():
    X, y, v = _data()
    v[::4] = 0.0
    keep = v > 0
    with_zeros = _fit(X, y, v)
    without = _fit(X[keep], y[keep], v[keep])
    np.testing.assert_allclose(with_zeros.coef_, without.coef_, rtol=0, atol=1e-12)
    K = rbf_kernel(X, gamma=0.5)
    pre = _fit(K, y, v, kernel="precomputed")
    ref = _fit(K[np.ix_(keep, keep)], y[keep], v[keep], kernel="precomputed")
    np.testing.assert_allclose(pre.decision_function(K), K[:, keep] @ ref.dual_coef_,
                               rtol=0, atol=1e-12)


def _with(n, value):
    w = np.ones(n)
    w[1] = value
    return w


@pytest.mark.parametrize(("kw", "weights", "message"), [
    ({}, lambda n: _with(n, -1.0), "sample_weight: every weight must be >= 0"),
    ({}, lambda n: _with(n, np.inf), "sample_weight: every weight must be finite"),
    ({}, lambda n: np.ones(n - 1), "sample_weight: expected shape"),
    ({"class_weight": {7: 1.0}}, None, "class_weight: 7 is not a class of y"),
    ({"class_weight": {0: -2.0}}, None, "class_weight: the weight of 0 must be finite and >= 0"),
    ({"class_weight": {0: 0.0}}, None, "class_weight: the rows of class 0 weigh 0 in all"),
    ({"class_weight": "heavy"}, None, "'class_weight' parameter of MSVMAv"),
])
def test_bad_weights_are_refused_naming_the_argument(kw, weights, message):
    X, y, _ = _data(n=20)
    with pytest.raises(ValueError, match=message):
        MSVMAv(max_iter=3, **kw).fit(X, y, sample_weight=None if weights is None
                                     else weights(y.size))


def test_calibration_folds_and_calibrator_take_the_weights():
    X, y, v = _data(n=120)
    model = MSVMAv(ALPHA, BETA, max_iter=T, calibration="sigmoid", random_state=0)
    model.fit(X, y, sample_weight=v)
    from solver.calibration import calibration_folds, fit_calibrator

    D = np.zeros(y.size)
    for train, test in calibration_folds(y, 5, 0).split(np.zeros(y.size), y):
        fold = MSVMAv(ALPHA, BETA, max_iter=T).fit(X[train], y[train], sample_weight=v[train])
        D[test] = fold.decision_function(X[test])
    expected = fit_calibrator(D, y, model.classes_, "sigmoid", sample_weight=v)
    assert model.calibrator_.params[0] == pytest.approx(expected.params[0], abs=1e-12)
    unweighted = fit_calibrator(D, y, model.classes_, "sigmoid")
    assert model.calibrator_.params[0]["a"] != pytest.approx(unweighted.params[0]["a"])


def test_the_cluster_fit_refuses_class_weights():
    from solver.distributed import check_cluster_params

    with pytest.raises(ValueError, match="class_weight: the cluster fit has no weighted form"):
        check_cluster_params(MSVMAv(class_weight="balanced"))


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_a_grid_search_with_class_weight_scores_weighted_fits(kernel):
    from solver.model_selection import cross_validate_grid, kfold_indices

    X, y, _ = _data(n=60)
    y = (X[:, 0] > 0.75).astype(int)  # imbalanced: the weights change the fits
    grid = {"alpha": [1.0, 16.0]} if kernel == "linear" else {"alpha": [1.0], "gamma": [0.5]}
    fixed = {"class_weight": "balanced", "max_iter": 20}
    result = cross_validate_grid("msvmav", X, y, kernel=kernel, grid=grid, cv=3, n_jobs=1,
                                 params=fixed)
    differ = False
    for row in result.table:
        scores = {cw: [float(np.mean(MSVMAv(kernel=kernel, **{**fixed, "class_weight": cw},
                                            **row["params"]).fit(X[tr], y[tr]).predict(X[te])
                                     == y[te]))
                       for tr, te in kfold_indices(y.size, 3, 0)]
                  for cw in ("balanced", None)}
        assert row["scores"] == scores["balanced"]
        differ |= scores["balanced"] != scores[None]
    assert differ  # the unweighted shortcuts would have scored otherwise
