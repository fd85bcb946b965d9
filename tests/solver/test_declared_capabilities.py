"""What estimators declare instead of being probed (issue 43): ``fit_report`` (iterations,
history, convergence against the stop/tol rule), ``model_summary``, ``out_of_fold``, the
``pairwise`` tag of a precomputed kernel, ``attributes_problem`` for a persisted model's JSON
attributes, and ``describe``."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import MinMaxScaler
from sklearn.utils import get_tags

from solver import LSSVM, ODM, SVM, MSVMAv, attributes_problem, model_from_dict


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=60, n_features=4, random_state=1)
    return MinMaxScaler().fit_transform(X), y


def test_msvmav_reports_its_rule_path_and_history(data):
    X, y = data
    est = MSVMAv(max_iter=3, tol=1e-12).fit(X, y)
    report = est.fit_report()
    assert report.n_iter == est.n_iter_ == len(est.history_) == len(report.history)
    assert report.converged is False and report.stop == "objective" and report.tol == 1e-12
    assert report.warning == est.fit_info_["warning"]  # ran out of iterations, in words
    assert report.path == {"linear_solver": est.linear_solver_, "kernel_approximation": None,
                           "fit_info": est.fit_info_}
    # the summary is the weight vector
    summary = est.model_summary()["weights"]
    assert np.allclose(summary["coef"], est.coef_) and summary["intercept"] == list(est.intercept_)


def test_closed_form_and_library_fits_report_no_rule(data):
    X, y = data
    for est in (LSSVM().fit(X, y), SVM(kernel="rbf").fit(X, y)):
        report = est.fit_report()
        assert report.converged is None and report.stop is None and report.tol is None
        assert report.path is None and report.history == []
    odm = ODM(max_iter=50, random_state=0).fit(X, y).fit_report()
    assert odm.converged is not None and odm.tol == 1e-3 and odm.stop is None


def test_kernel_summary_counts_the_expansion(data):
    X, y = data
    est = MSVMAv(kernel="rbf", max_iter=5).fit(X, y)
    info = est.model_summary()["kernel_summary"]
    assert info["kernel"] == "rbf" and info["gamma"] == est.gamma_
    assert info["n_expansion_terms"] == len(X) and info["rank"] == len(X)
    assert info["dual_coef_l1"] == pytest.approx(np.abs(est.dual_coef_).sum())


def test_out_of_fold_only_for_a_calibrated_fit_and_not_after_a_reload(data):
    X, y = data
    assert MSVMAv(max_iter=5).fit(X, y).out_of_fold() is None
    est = MSVMAv(max_iter=5, calibration="sigmoid").fit(X, y)
    D, idx = est.out_of_fold()
    assert D.shape == (len(y),) and np.array_equal(est.classes_[idx], y)
    assert model_from_dict(est.to_dict()).out_of_fold() is None  # not persisted


def test_a_precomputed_kernel_is_pairwise_and_calibrates_on_its_rows(data):
    X, y = data
    assert not get_tags(MSVMAv(kernel="rbf")).input_tags.pairwise
    assert get_tags(MSVMAv(kernel="precomputed")).input_tags.pairwise
    assert not get_tags(MSVMAv(kernel="unknown")).input_tags.pairwise  # refused at fit
    K = rbf_kernel(X, X, gamma=0.5)
    est = MSVMAv(kernel="precomputed", calibration="sigmoid", max_iter=5).fit(K, y)
    assert est.predict_proba(K).shape == (len(y), 2)


def test_persisted_attributes_are_the_class_own(data):
    assert attributes_problem(SVM, {"gamma_": 1.0, "n_iter_": 3}) is None
    assert "among SVM's" in attributes_problem(SVM, {"history_": []})
    assert attributes_problem(SVM, []) is not None
    X, y = data
    assert MSVMAv(kernel="rbf", approximation="nystroem", n_components=10,
                  max_iter=3).fit(X, y).describe() == "MSVMAv (kernel rbf, nystroem)"
    assert SVM().describe() == "SVM (kernel linear)"
