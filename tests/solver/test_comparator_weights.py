"""The comparators and weights: SVM and SVR pass the rows' weights to LIBLINEAR / LIBSVM
(compared with scikit-learn's machines fitted with the same sample_weight); the hand-written
comparators have no weighted form, and their fit has no sample_weight."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import svm as sk_svm
from sklearn.utils.validation import has_fit_parameter

from solver.comparators import FMM, LSSVM, MAMC, ODM, SVM, SVR


def _data(n=80, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    y = (X[:, 0] + 0.2 * rng.standard_normal(n) > 0.65).astype(int)
    return X, y, rng.random(n) * 2 + 0.1


def test_svm_kernel_passes_the_weights_to_libsvm():
    X, y, w = _data()
    ours = SVM(C=2.0, kernel="rbf", gamma=0.5).fit(X, y, sample_weight=w)
    ref = sk_svm.SVC(C=2.0, gamma=0.5, tol=1e-4).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-10)
    unweighted = SVM(C=2.0, kernel="rbf", gamma=0.5).fit(X, y)
    assert np.abs(unweighted.decision_function(X) - ours.decision_function(X)).max() > 1e-3


def test_svm_linear_class_weight_is_liblinears():
    X, y, _ = _data()
    ours = SVM(C=2.0, class_weight="balanced", random_state=0).fit(X, y)
    ref = sk_svm.LinearSVC(C=2.0, class_weight="balanced", tol=1e-4, random_state=0,
                           intercept_scaling=1.0).fit(X, y)
    np.testing.assert_allclose(ours.coef_[0], ref.coef_[0], atol=1e-6)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-6)


def test_svr_passes_the_weights():
    X, y, w = _data()
    ours = SVR(C=2.0, kernel="rbf", gamma=0.5).fit(X, y, sample_weight=w)
    ref = sk_svm.SVR(C=2.0, gamma=0.5, tol=1e-4, epsilon=0.1).fit(X, 2.0 * y - 1,
                                                                  sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(X), ref.predict(X), atol=1e-10)


@pytest.mark.parametrize("estimator", [LSSVM(), MAMC(), ODM(), FMM()])
def test_comparators_without_a_weighted_form_refuse_weights(estimator):
    X, y, w = _data(n=30)
    assert not has_fit_parameter(estimator, "sample_weight")
    assert "class_weight" not in estimator.get_params()
    with pytest.raises(TypeError, match="sample_weight"):
        estimator.fit(X, y, sample_weight=w)
