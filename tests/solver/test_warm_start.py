"""MSVMAv(warm_start=True): a refit starts from the previous fit's solution where it lives in
the coordinates the new fit iterates in (linear, exact kernel), else from the MAMC direction;
the auto search ranks by balanced accuracy when the fits are class-weighted."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import StratifiedKFold

from solver.auto_search import auto_search
from solver.msvmav import MSVMAv
from solver.scaling import MinMaxScaling


def _data(n: int = 300, classes: int = 2, weights=None):
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=classes, n_clusters_per_class=1, weights=weights,
                               random_state=0)
    return MinMaxScaling.fit(X).transform(X), y


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_a_warm_refit_starts_where_the_previous_fit_ended(kernel, classes):
    """With max_iter=0 a fit is its start: warm, that is the previous fit's solution (the
    same decision values); cold, the MAMC direction."""
    X, y = _data(classes=classes)
    extra = {"approximation": "exact"} if kernel == "rbf" else {}
    est = MSVMAv(kernel=kernel, alpha=16.0, beta=2.0**-6, **extra).fit(X, y)
    before = est.decision_function(X)
    est.set_params(beta=0.25, max_iter=0, warm_start=True).fit(X, y)
    np.testing.assert_allclose(est.decision_function(X), before, rtol=1e-9, atol=1e-12)
    cold = MSVMAv(kernel=kernel, alpha=16.0, beta=0.25, max_iter=0, **extra).fit(X, y)
    assert not np.allclose(cold.decision_function(X), before)


def test_a_first_fit_and_another_path_start_from_the_mamc_direction():
    X, y = _data()
    first = MSVMAv(warm_start=True).fit(X, y)
    assert np.array_equal(first.coef_, MSVMAv().fit(X, y).coef_)
    # the low-rank path's coordinates are each factorisation's own: no warm start
    est = MSVMAv(kernel="rbf", approximation="exact").fit(X, y)
    est.set_params(approximation="low_rank", warm_start=True, random_state=0).fit(X, y)
    want = MSVMAv(kernel="rbf", approximation="low_rank", random_state=0).fit(X, y)
    np.testing.assert_allclose(est.decision_function(X), want.decision_function(X))
    # other rows (here fewer): the exact kernel's dual_coef_ does not fit, a cold start
    est = MSVMAv(kernel="rbf", approximation="exact").fit(X, y)
    est.set_params(warm_start=True).fit(X[:200], y[:200])
    want = MSVMAv(kernel="rbf", approximation="exact").fit(X[:200], y[:200])
    np.testing.assert_allclose(est.decision_function(X), want.decision_function(X))


def test_a_warm_start_from_a_neighbour_needs_fewer_iterations():
    X, y = _data(n=600)
    cold = MSVMAv(alpha=16.0, beta=0.25).fit(X, y)
    warm = MSVMAv(alpha=16.0, beta=2.0**-6).fit(X, y)
    warm.set_params(beta=0.25, warm_start=True).fit(X, y)
    assert warm.n_iter_ < cold.n_iter_
    assert np.mean(warm.predict(X) == cold.predict(X)) > 0.98


def test_class_weighted_races_rank_by_balanced_accuracy():
    X, y = _data(n=300, weights=[0.85, 0.15])
    fixed = {"stop": "objective", "tol": 1e-4, "class_weight": "balanced"}
    found = auto_search(X, y, budget_seconds=600, random_state=1, params=fixed,
                        kernels=("linear",))
    assert found.scoring == "balanced_accuracy" and found.to_dict()["scoring"] == found.scoring
    assert found.reason.startswith("highest mean balanced accuracy over 3 stratified folds")
    best = found.table[found.best_index]
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=1)
    want = [balanced_accuracy_score(y[test], (found.oof[test] > 0).astype(int))
            for _, test in folds.split(np.zeros(len(y)), y)]
    assert best["scores"] == pytest.approx(want)
    assert best["mean_score"] == max(r["mean_score"] for r in found.table
                                     if r["status"] == "finalist")
    plain = auto_search(X, y, budget_seconds=600, random_state=1, params=fixed,
                        kernels=("linear",), scoring="accuracy")
    assert plain.scoring == "accuracy"
    assert plain.table[plain.best_index]["mean_score"] == pytest.approx(
        plain.table[plain.best_index]["mean_accuracy"])
