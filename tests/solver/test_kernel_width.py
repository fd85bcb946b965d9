"""The kernel width by default: scikit-learn's "scale", 1 / (d Var(X)), and its "auto", 1 / d
(issue 49, "a width that fits the data"), checked against an independent computation."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_classification
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import SVC

from solver import ALGORITHMS, MSVMAv
from solver.kernels import resolve_gamma
from solver.model_selection import cross_validate_grid


@pytest.fixture
def data():
    X, y = make_classification(n_samples=120, n_features=7, n_informative=4, random_state=3)
    return MinMaxScaler().fit_transform(X), y


def test_default_rbf_width_is_scale(data):
    X, y = data
    m = MSVMAv(kernel="rbf", max_iter=5).fit(X, y)
    assert m.get_params()["gamma"] == "scale"
    assert m.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()), rel=1e-12)
    # scikit-learn's own SVC resolves "scale" to the same width
    assert m.gamma_ == pytest.approx(SVC().fit(X, y)._gamma, rel=1e-12)


def test_auto_and_none_mean_one_over_d(data):
    X, y = data
    for gamma in ("auto", None):
        assert MSVMAv(kernel="rbf", gamma=gamma, max_iter=5).fit(X, y).gamma_ == 1.0 / 7


def test_scale_on_sparse_rows_equals_dense():
    S = sparse.random(80, 9, density=0.3, format="csr", random_state=1)
    dense = S.toarray()
    assert resolve_gamma("scale", S) == pytest.approx(1.0 / (9 * dense.var()), rel=1e-12)


def test_scale_on_constant_rows_is_one():
    assert resolve_gamma("scale", np.full((5, 3), 0.5)) == 1.0


def test_scale_over_blocks_equals_numpy():
    X = np.random.default_rng(0).random((9000, 3)) * 0.2 + 0.7
    assert resolve_gamma("scale", X) == pytest.approx(1.0 / (3 * X.var()), rel=1e-10)


@pytest.mark.parametrize("name", ["lssvm", "mamc", "odm", "fmm", "svm", "svr"])
def test_comparators_default_to_scale(name, data):
    X, y = data
    est = ALGORITHMS[name](kernel="rbf")
    assert est.get_params()["gamma"] == "scale"
    est.fit(X, y)
    assert est.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()), rel=1e-12)


def test_unknown_width_name_is_refused(data):
    X, y = data
    with pytest.raises(ValueError, match="gamma"):
        MSVMAv(kernel="rbf", gamma="wide").fit(X, y)


def test_search_resolves_named_width_on_searched_rows(data):
    X, y = data
    res = cross_validate_grid("msvmav", X, y, kernel="rbf", grid={"alpha": [16.0]}, cv=2,
                              n_jobs=1, params={"max_iter": 3})
    assert res.table[0]["params"]["gamma"] == pytest.approx(1.0 / (7 * X.var()), rel=1e-12)
