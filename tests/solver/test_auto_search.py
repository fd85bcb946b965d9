"""solver.auto_search: the race's cells are the plain fits they stand for, the winner's
out-of-fold decision values calibrate the final model with no further fit, and the budget
bounds what is tried."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification
from sklearn.model_selection import StratifiedKFold

from solver import calibration, protocol
from solver.auto_search import auto_search, candidates, default_budget
from solver.calibration import fit_calibrator
from solver.msvmav import MSVMAv
from solver.scaling import MinMaxScaling

FIXED = {"stop": "objective", "tol": 1e-4, "max_iter": 100}


def _data(n: int = 240, classes: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=classes, n_clusters_per_class=1, random_state=seed)
    return MinMaxScaling.fit(X).transform(X), y


def _plain_oof(X, y, setting: dict, kernel: str, cv: int, seed: int) -> np.ndarray:
    """The out-of-fold decision values of a plain loop of MSVMAv fits (independent of the
    race's shared Gram matrices and lockstep batches)."""
    k = np.unique(y).size
    out = np.zeros(len(y) if k == 2 else (len(y), k))
    folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)
    for train, test in folds.split(np.zeros(len(y)), y):
        extra = {"approximation": "exact"} if kernel == "rbf" else {}
        est = MSVMAv(kernel=kernel, **FIXED, **extra, **setting).fit(X[train], y[train])
        out[test] = est.decision_function(X[test])
    return out


@pytest.mark.parametrize("classes", [2, 3])
def test_every_finalists_out_of_fold_values_are_the_plain_fits(classes):
    X, y = _data(classes=classes)
    found = auto_search(X, y, budget_seconds=600, random_state=3, params=FIXED)
    finalists = [i for i, row in enumerate(found.table) if row["status"] == "finalist"]
    assert found.best_index in finalists and len(finalists) >= 2
    kernels = {found.table[i]["kernel"] for i in range(len(found.table))}
    assert kernels == {"linear", "rbf"}
    for i in [found.best_index]:
        row = found.table[i]
        want = _plain_oof(X, y, row["params"], row["kernel"], found.cv, 3)
        np.testing.assert_allclose(found.oof, want, rtol=1e-6, atol=1e-8)
        k = np.unique(y).size
        pred = (want > 0).astype(int) if k == 2 else np.argmax(want, axis=1)
        assert row["mean_accuracy"] == pytest.approx(np.mean(pred == y), abs=0.02)


def test_winner_is_the_best_mean_of_the_finalists():
    X, y = _data(n=300, seed=1)
    found = auto_search(X, y, budget_seconds=600, params=FIXED)
    best = found.table[found.best_index]
    finalist_means = [r["mean_accuracy"] for r in found.table if r["status"] == "finalist"]
    assert best["mean_accuracy"] == max(finalist_means)
    assert np.mean(best["scores"]) == pytest.approx(best["mean_accuracy"])
    assert "highest mean accuracy over 3 stratified folds" in found.reason


def test_a_small_budget_skips_rbf_widths_and_says_so():
    X, y = _data(n=300, seed=2)
    found = auto_search(X, y, budget_seconds=1e-3, params=FIXED)
    status = [r["status"] for r in found.table]
    assert "skipped: budget" in status
    # the linear settings always run; the first width starts (its fit stopped at the
    # deadline does not count), no other width does
    assert all(r["folds"] >= 1 for r in found.table if r["kernel"] == "linear")
    started = {r["params"]["gamma"] for r in found.table
               if r["kernel"] == "rbf" and r["seconds"] > 0}
    assert len(started) == 1
    assert found.table[found.best_index]["kernel"] == "linear"
    assert found.budget_seconds == 1e-3 and found.seconds > 0


def test_default_budget_grows_with_the_rows():
    assert default_budget(200, 5) < default_budget(2000, 5) < default_budget(15000, 5)
    assert default_budget(10**9, 5) == 900.0


def test_gamma_candidates_reach_well_beyond_sixteen_over_d():
    X, y = _data()
    gammas = {s.params["gamma"] for s in candidates(X) if s.kernel == "rbf"}
    scale = 1.0 / (X.shape[1] * np.var(X))
    assert sorted(gammas) == pytest.approx([f * scale for f in (0.25, 1, 4, 16)])
    assert max(gammas) > 4 * 16.0 / X.shape[1]  # the paper's grid stops at 16 / d


def test_auto_plan_calibrates_on_the_race_folds_without_another_fit(monkeypatch):
    X, y = load_iris(return_X_y=True)
    plan = protocol.Plan(grid="auto", params={**FIXED, "calibration": "sigmoid"},
                         budget_seconds=10)

    def refuse(*args, **kwargs):
        raise AssertionError("a second round of calibration folds was fitted")

    monkeypatch.setattr(calibration, "cross_validated_decisions", refuse)
    monkeypatch.setattr("solver._base.cross_validated_decisions", refuse)
    fitted = protocol.fit(plan, X, y)
    est, found = fitted.estimator, fitted.search
    assert est.calibrated and est.calibration == "sigmoid"
    want = fit_calibrator(found.oof, y, est.classes_, "sigmoid")
    for got, ref in zip(est.calibrator_.params, want.params, strict=True):
        assert got == pytest.approx(ref)
    assert np.array_equal(est.oof_decision_, found.oof)
    assert est.kernel == found.kernel and est.alpha == found.best_params["alpha"]
    P = est.predict_proba(fitted.X_train)
    assert np.allclose(P.sum(axis=1), 1.0)


def test_comparators_enter_the_race_with_their_quick_grids():
    X, y = _data(n=200, seed=4)
    found = auto_search(X, y, budget_seconds=600, kernels=("linear",),
                        algorithms=("msvmav", "svm"), params=FIXED)
    svm = [r for r in found.table if r["algorithm"] == "svm"]
    assert len(svm) == 3 and all(r["folds"] >= 1 for r in svm)
    assert {r["algorithm"] for r in found.table} == {"msvmav", "svm"}
    best = found.table[found.best_index]
    assert best["mean_accuracy"] == max(r["mean_accuracy"] for r in found.table
                                        if r["status"] == "finalist")


def test_a_comparator_winner_is_refitted_and_calibrated_from_its_folds():
    X, y = _data(n=200, seed=5)
    plan = protocol.Plan(grid="auto", kernels=("linear",), algorithms=("svm",),
                         params={**FIXED, "calibration": "sigmoid"}, budget_seconds=60)
    fitted = protocol.fit(plan, X, y)
    est, found = fitted.estimator, fitted.search
    assert type(est).__name__ == "SVM" and found.algorithm == "svm"
    assert found.best_params["C"] == est.C and est.calibrated
    want = fit_calibrator(found.oof, y, est.classes_, "sigmoid")
    assert est.calibrator_.params[0] == pytest.approx(want.params[0])
