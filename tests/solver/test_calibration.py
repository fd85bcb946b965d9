"""Calibrated probabilities (solver.calibration) against scikit-learn's
CalibratedClassifierCV(ensemble=False) on the same estimator and folds, for every model kind;
their JSON persistence; the "none" default; and MSVMAv's convergence report against ``tol``."""

import json
import math

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_classification
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.preprocessing import MinMaxScaler

from solver import FMM, LSSVM, MAMC, ODM, SVM, SVR, MSVMAv, model_from_dict
from solver.calibration import (
    Calibrator,
    calibration_folds,
    cross_validated_decisions,
    fit_calibrator,
)
from solver.params import InvalidParameterError

# sklearn's Platt fit stops at L-BFGS-B's gtol = 1e-6; ours solves the same convex problem to
# machine precision, so the probabilities agree to about that
SIGMOID_TOL = 1e-6


def make_data(n=150, d=5, classes=2, seed=0):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=min(d, 4),
                               n_redundant=0, n_classes=classes, n_clusters_per_class=1,
                               flip_y=0.1, random_state=seed)
    return MinMaxScaler().fit_transform(X), y


ESTIMATORS = {
    "msvmav-linear": MSVMAv(random_state=0),
    "msvmav-rbf-exact": MSVMAv(kernel="rbf", random_state=0),
    "msvmav-rbf-low_rank": MSVMAv(kernel="rbf", approximation="low_rank", kernel_tol=1e-3,
                                  random_state=0),
    "msvmav-rbf-nystroem": MSVMAv(kernel="rbf", approximation="nystroem", n_components=20,
                                  random_state=0),
    "svm-linear": SVM(random_state=0),
    "svm-rbf": SVM(kernel="rbf"),
    "svr-linear": SVR(random_state=0),
    "lssvm-rbf": LSSVM(kernel="rbf"),
    "mamc-linear": MAMC(),
    "odm-linear": ODM(random_state=0),
    "fmm-linear": FMM(n_iter=20),
}


def reference(est, method, X, y, seed=0):
    """scikit-learn's calibration of the same (uncalibrated) estimator on the same folds."""
    return CalibratedClassifierCV(clone(est), method=method, ensemble=False,
                                  cv=StratifiedKFold(5, shuffle=True, random_state=seed)).fit(X, y)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_probabilities_equal_sklearn_calibrated_classifier(name, method):
    X, y = make_data()
    est = ESTIMATORS[name]
    ours = clone(est).set_params(calibration=method).fit(X, y)
    ref = reference(est, method, X, y)
    X_new, _ = make_data(n=40, seed=1)
    P = ours.predict_proba(X_new)
    tol = SIGMOID_TOL if method == "sigmoid" else 1e-12
    np.testing.assert_allclose(P, ref.predict_proba(X_new), atol=tol, rtol=0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    # the model itself is the one fitted on every row, as with ensemble=False
    np.testing.assert_array_equal(ours.decision_function(X_new),
                                  clone(est).fit(X, y).decision_function(X_new))


@pytest.mark.parametrize("name", ["msvmav-linear", "msvmav-rbf-exact", "svm-linear",
                                  "lssvm-rbf"])
@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_multiclass_one_vs_rest_normalised_as_sklearn(name, method):
    X, y = make_data(n=180, classes=3, seed=2)
    est = ESTIMATORS[name]
    ours = clone(est).set_params(calibration=method).fit(X, y)
    P = ours.predict_proba(X)
    assert P.shape == (180, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    tol = SIGMOID_TOL if method == "sigmoid" else 1e-12
    np.testing.assert_allclose(P, reference(est, method, X, y).predict_proba(X), atol=tol,
                               rtol=0)


def test_cross_validated_decisions_are_sklearn_out_of_fold_values():
    X, y = make_data(n=120)
    D = cross_validated_decisions(MSVMAv(), X, y, random_state=3)
    ref = cross_val_predict(MSVMAv(), X, y, method="decision_function",
                            cv=StratifiedKFold(5, shuffle=True, random_state=3))
    np.testing.assert_allclose(D, ref, rtol=0, atol=1e-12)


def test_precomputed_kernel_folds_cut_the_training_columns():
    X, y = make_data(n=100)
    gamma = 1.0 / X.shape[1]
    rbf = MSVMAv(kernel="rbf", gamma="auto", calibration="sigmoid").fit(X, y)
    pre = MSVMAv(kernel="precomputed", calibration="sigmoid").fit(rbf_kernel(X, gamma=gamma), y)
    X_new, _ = make_data(n=30, seed=4)
    np.testing.assert_allclose(pre.predict_proba(rbf_kernel(X_new, X, gamma=gamma)),
                               rbf.predict_proba(X_new), atol=1e-8)


def test_platt_sigmoid_minimises_the_smoothed_log_loss():
    """Independent check of the optimum: the gradient of Platt's objective vanishes there."""
    rng = np.random.default_rng(0)
    f = rng.normal(size=300) * 40.0  # large values: the rescaling path
    positive = rng.random(300) < 1 / (1 + np.exp(-f / 20))
    cal = fit_calibrator(f, np.where(positive, "b", "a"), np.array(["a", "b"]), "sigmoid")
    a, b = cal.params[0]["a"], cal.params[0]["b"]
    n_pos, n_neg = positive.sum(), (~positive).sum()
    t = np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    p = 1 / (1 + np.exp(a * f + b))
    assert abs(np.sum((t - p) * f)) / np.sum(np.abs(f)) < 1e-8  # d/da
    assert abs(np.sum(t - p)) / f.size < 1e-8  # d/db


def test_isotonic_equals_sklearn_isotonic_regression_outside_the_range_too():
    rng = np.random.default_rng(1)
    f = rng.normal(size=200)
    y = (rng.random(200) < 1 / (1 + np.exp(-2 * f))).astype(int)
    cal = fit_calibrator(f, y, np.array([0, 1]), "isotonic")
    grid = np.linspace(-5, 5, 101)
    iso = IsotonicRegression(out_of_bounds="clip").fit(f, y)
    np.testing.assert_allclose(cal.predict_proba(grid)[:, 1], iso.predict(grid), atol=1e-15)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_calibrator_persists_as_json_and_predicts_the_same(method):
    X, y = make_data(n=150, classes=3, seed=5)
    y = np.array(["low", "mid", "high"])[y]
    est = MSVMAv(calibration=method).fit(X, y)
    data = est.to_dict()
    text = json.dumps(data["meta"])  # the calibrator is plain JSON, no pickle
    restored = model_from_dict({"meta": json.loads(text), "arrays": data["arrays"]})
    np.testing.assert_array_equal(restored.predict_proba(X), est.predict_proba(X))
    assert isinstance(restored.calibrator_, Calibrator)
    again = Calibrator.from_dict(json.loads(json.dumps(est.calibrator_.to_dict())))
    np.testing.assert_array_equal(again.predict_proba(est.decision_function(X)),
                                  est.predict_proba(X))


def test_none_is_the_default_no_extra_fits_and_no_predict_proba():
    X, y = make_data()
    fits = []
    est = MSVMAv().fit(X, y, callback=lambda info: fits.append(info.get("phase")))
    assert est.calibration == "none" and est.calibrator_ is None
    assert not hasattr(est, "predict_proba")
    assert "calibration" not in fits
    with pytest.raises(ValueError, match="no probability calibration"):
        est.probabilities(est.decision_function(X))
    restored = model_from_dict(est.to_dict())
    assert restored.calibrator_ is None and not hasattr(restored, "predict_proba")


def test_a_model_persisted_before_calibration_existed_loads_without_probabilities():
    X, y = make_data()
    data = MSVMAv().fit(X, y).to_dict()
    del data["meta"]["params"]["calibration"]
    del data["meta"]["calibrator"]
    del data["arrays"]["feature_means_"]
    restored = model_from_dict(data)
    assert restored.calibration == "none" and restored.feature_means_ is None


def test_unknown_calibration_is_rejected_naming_the_parameter():
    X, y = make_data()
    for est in (MSVMAv(calibration="platt"), SVM(calibration="platt"), FMM(calibration=1)):
        with pytest.raises(InvalidParameterError, match="'calibration' parameter"):
            est.fit(X, y)


def test_calibration_needs_two_rows_of_each_class():
    X, y = make_data(n=40)
    y[:] = 0
    y[0] = 1
    with pytest.raises(ValueError, match="at least 2 training rows of every class"):
        calibration_folds(y)
    # a class with 3 rows: 3 folds instead of 5
    y[:3] = 1
    assert calibration_folds(y).get_n_splits() == 3


def test_callback_sees_the_calibration_fits_and_can_stop_them():
    X, y = make_data()
    seen = []

    def stop_in_calibration(info):
        seen.append(info.get("phase"))
        return info.get("phase") == "calibration"

    est = MSVMAv(calibration="sigmoid").fit(X, y, callback=stop_in_calibration)
    assert "calibration" in seen
    assert est.stopped_early_ and est.calibrator_ is None
    with pytest.raises(ValueError, match="no probability calibration"):
        est.predict_proba(X)


def test_feature_means_are_the_training_column_means():
    X, y = make_data()
    np.testing.assert_allclose(MSVMAv().fit(X, y).feature_means_, X.mean(axis=0))
    # sparse X: its column sums over n (no copy of its values), the same means, zeros counted
    values = np.asarray(X)
    Xs = sparse.csr_matrix(np.where(values > np.median(values), values, 0.0))
    means = MSVMAv().fit(Xs, y).feature_means_
    np.testing.assert_allclose(means, Xs.toarray().mean(axis=0), rtol=1e-13, atol=1e-15)


# -- convergence ----------------------------------------------------------------------------
def _linear_iterate(X, y, k):
    est = MSVMAv(max_iter=k, tol=0.0, stop="step").fit(X, y)
    return np.concatenate([est.coef_[0], est.intercept_])


def test_converged_when_the_last_relative_change_falls_below_tol():
    X, y = make_data()
    est = MSVMAv(max_iter=100, tol=1e-3, stop="step").fit(X, y)
    assert est.converged_
    assert est.n_iter_ < 100
    change = est.fit_info_["last_relative_change"]
    assert change < est.tol
    # independently: the distance between the last two iterates, ||w_k - w_{k-1}|| / sqrt(D)
    k = est.n_iter_
    w_k, w_prev = _linear_iterate(X, y, k), _linear_iterate(X, y, k - 1)
    assert change == pytest.approx(np.linalg.norm(w_k - w_prev) / math.sqrt(w_k.size),
                                   rel=1e-6)
    # and one iteration earlier the change was still at least tol (else it would have stopped)
    w_prev2 = _linear_iterate(X, y, k - 2)
    assert np.linalg.norm(w_prev - w_prev2) / math.sqrt(w_k.size) >= est.tol


def test_not_converged_when_max_iter_binds_before_tol():
    X, y = make_data()
    est = MSVMAv(max_iter=5, tol=1e-12, stop="step").fit(X, y)
    assert not est.converged_ and est.n_iter_ == 5
    assert est.fit_info_["last_relative_change"] >= est.tol
    assert est.fit_info_["last_relative_change"] == est.history_[-1]["step"]
    restored = model_from_dict(est.to_dict())
    assert restored.converged_ is False


def test_multiclass_convergence_needs_every_task_and_reports_the_largest_change():
    X, y = make_data(n=150, classes=3, seed=6)
    est = MSVMAv(max_iter=100, tol=1e-3, stop="step").fit(X, y)
    last = {}
    for record in est.history_:
        last[record["task"]] = record["step"]
    assert est.fit_info_["last_relative_change"] == max(last.values())
    assert est.converged_ == all(s < est.tol for s in last.values())


def test_max_iter_zero_takes_no_step_and_is_not_converged():
    X, y = make_data()
    est = MSVMAv(max_iter=0).fit(X, y)
    assert not est.converged_ and est.fit_info_["last_relative_change"] is None


@pytest.mark.parametrize("kernel_args", [{"kernel": "rbf"},
                                         {"kernel": "rbf", "approximation": "low_rank"}])
def test_kernel_fits_report_convergence_too(kernel_args):
    X, y = make_data()
    est = MSVMAv(max_iter=200, tol=1e-4, stop="step", random_state=0, **kernel_args).fit(X, y)
    change = est.fit_info_["last_relative_change"]
    assert change == est.history_[-1]["step"]
    assert est.converged_ == (change < est.tol)
    assert est.converged_ == (est.n_iter_ < 200 or change < est.tol)


@pytest.mark.parametrize("corrupt, message", [
    (lambda d: d.update(format="x"), "not a calibrator"),
    (lambda d: d.update(method="temperature"), "unknown method"),
    (lambda d: d.update(classes=["a"]), "at least 2 labels"),
    (lambda d: d["params"].append(d["params"][0]), "2 maps for 2 classes"),
    (lambda d: d["params"][0].update(a="nan"), "malformed sigmoid parameters"),
    (lambda d: d["params"][0].pop("b"), "malformed sigmoid parameters"),
    (lambda d: d["params"].__setitem__(0, "x"), "malformed sigmoid parameters"),
])
def test_a_malformed_stored_calibrator_is_a_value_error_naming_it(corrupt, message):
    X, y = make_data(n=60)
    data = json.loads(json.dumps(MSVMAv(calibration="sigmoid").fit(X, y).calibrator_.to_dict()))
    corrupt(data)
    with pytest.raises(ValueError, match=message):
        Calibrator.from_dict(data)


def test_a_malformed_isotonic_map_is_refused():
    X, y = make_data(n=60)
    data = json.loads(json.dumps(MSVMAv(calibration="isotonic").fit(X, y).calibrator_.to_dict()))
    data["params"][0]["x"] = data["params"][0]["x"][::-1] + [0.0]
    with pytest.raises(ValueError, match="malformed isotonic parameters"):
        Calibrator.from_dict(data)
