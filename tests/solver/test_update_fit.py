"""MSVMAv.update_fit (issue 48): an update for rows added and removed is the warm-started fit
of the updated rows, computed independently here by ``fit`` with ``warm_start=True`` from a
start built by hand on a restored copy of the parent (which forms K and (I + K)^{-1} afresh);
the bordered inverse against numpy's inverse; what the update reports and persists."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError

from solver import MSVMAv, model_from_dict, updated_rows
from solver.calibration import calibration_folds
from solver.incremental import bordered_pair, final_rate, row_change
from solver.kernels import make_kernel
from solver.scaling import MinMaxScaling

REMOVE = [0, 5, 7, 123]


def _data(n: int = 420, classes: int = 2):
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=classes, n_clusters_per_class=1, random_state=0)
    X = MinMaxScaling.fit(X).transform(X)
    return X[:340], y[:340], X[340:], y[340:]


def _independent(parent: MSVMAv, X0, y0, X1, y1, tol: float, sample_weight=None):
    """The warm-started fit of the updated rows, from a restored copy of the parent."""
    ref = model_from_dict(parent.to_dict())
    keep = np.setdiff1d(np.arange(len(y0)), REMOVE)
    Xn, yn = np.vstack([X0[keep], X1]), np.r_[y0[keep], y1]
    if ref.kernel != "linear":  # the same function on the kept rows, 0 on the added ones
        dual = np.atleast_2d(ref.dual_coef_.T).T
        start = np.zeros((yn.size, dual.shape[1]))
        start[: keep.size] = dual[keep]
        ref.dual_coef_ = start[:, 0] if start.shape[1] == 1 else start
        ref.set_params(gamma=parent.gamma_)
    ref.set_params(warm_start=True, tol=tol).fit(Xn, yn, sample_weight=sample_weight)
    return ref, Xn, yn


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_an_update_is_the_warm_started_fit_of_the_updated_rows(kernel, classes):
    X0, y0, X1, y1 = _data(classes=classes)
    extra = {"kernel": "rbf", "approximation": "exact"} if kernel == "rbf" else {}
    est = MSVMAv(warm_start=True, **extra).fit(X0, y0)
    parent = model_from_dict(est.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.update_fit((X0, y0), add=(X1, y1), remove=REMOVE)
        report = est.fit_report().warm_start
        ref, Xn, yn = _independent(parent, X0, y0, X1, y1, report["tol"])
    np.testing.assert_allclose(est.decision_function(Xn), ref.decision_function(Xn),
                               rtol=1e-8, atol=1e-10)
    assert est.n_iter_ == ref.n_iter_
    assert report["start"] == "parent"
    assert (report["rows_before"], report["rows_removed"], report["rows_added"],
            report["rows"]) == (340, 4, 80, 416)
    if kernel == "rbf":  # the parent kept (K, (I + K)^-1) in memory: bordered, not formed
        assert any("bordered" in r for r in report["reused"])
        assert est.gamma_ == parent.gamma_


def test_the_bordered_inverse_is_the_inverse_of_the_updated_rows():
    X0, _, X1, _ = _data()
    kernel = make_kernel("rbf", gamma=0.7)
    K = kernel.gram(X0)
    Binv = np.linalg.inv(np.eye(len(X0)) + K)
    change = row_change(len(X0), len(X1), REMOVE)
    kept = X0[change.keep]
    Kn, Bn = bordered_pair(K, Binv, change, kernel.matrix(kept, X1), kernel.gram(X1))
    rows = np.vstack([kept, X1])
    want_K = kernel.gram(rows)
    np.testing.assert_allclose(Kn, want_K, atol=1e-13)
    np.testing.assert_allclose(Bn, np.linalg.inv(np.eye(len(rows)) + want_K), atol=1e-10)
    only_removed = row_change(len(X0), 0, REMOVE)
    _, Br = bordered_pair(K, Binv, only_removed, np.zeros((336, 0)), np.zeros((0, 0)))
    np.testing.assert_allclose(Br, np.linalg.inv(np.eye(336) + K[np.ix_(change.keep,
                                                                          change.keep)]),
                               atol=1e-10)


def test_a_restored_parent_updates_to_the_same_model_and_the_report_persists():
    """A parent read back from to_dict (no factorisation in memory) forms K and its inverse
    afresh; the result is the in-memory, bordered update's. The report survives JSON."""
    X0, y0, X1, y1 = _data()
    est = MSVMAv(kernel="rbf", approximation="exact", warm_start=True).fit(X0, y0)
    restored = model_from_dict(est.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.update_fit((X0, y0), add=(X1, y1), remove=REMOVE)
        restored.update_fit((X0, y0), add=(X1, y1), remove=REMOVE)
    Xn, yn = updated_rows(X0, y0, (X1, y1), remove=REMOVE)
    np.testing.assert_allclose(restored.decision_function(Xn), est.decision_function(Xn),
                               rtol=1e-8, atol=1e-10)
    assert not any("bordered" in r for r in restored.fit_report().warm_start["reused"])
    data = est.to_dict()
    meta = json.loads(json.dumps(data["meta"]))
    again = model_from_dict({"meta": meta, "arrays": data["arrays"]})
    assert again.fit_report().warm_start == json.loads(json.dumps(est.fit_info_))["warm_start"]


def test_a_chain_of_updates_follows_the_rows_and_measures_against_a_cold_fit():
    X0, y0, X1, y1 = _data()
    est = MSVMAv().fit(X0, y0)
    cold_iter = est.n_iter_
    est.update_fit((X0, y0), add=(X1[:40], y1[:40]))
    first = est.fit_report().warm_start
    assert first["cold"] == {"measured": False, "rows": 340, "n_iter": cold_iter,
                             "seconds": pytest.approx(first["cold"]["seconds"])}
    Xa, ya = updated_rows(X0, y0, (X1[:40], y1[:40]))
    est.update_fit((Xa, ya), add=(X1[40:], y1[40:]), remove=[1, 2], measure_cold=True)
    second = est.fit_report().warm_start
    assert second["rows"] == 340 + 40 - 2 + 40 and second["cold"]["measured"]
    Xb, yb = updated_rows(Xa, ya, (X1[40:], y1[40:]), remove=[1, 2])
    cold = MSVMAv().fit(Xb, yb)
    assert second["cold"]["n_iter"] == cold.n_iter_
    assert second["iterations_saved"] == cold.n_iter_ - est.n_iter_
    assert second["cold"]["agreement"] == np.mean(cold.predict(Xb) == est.predict(Xb))
    assert second["speedup"] == pytest.approx(second["cold"]["seconds"] / second["seconds"])


def test_a_parent_that_ran_out_of_iterations_is_continued_to_its_own_rate():
    X0, y0, X1, y1 = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MSVMAv(max_iter=8).fit(X0, y0)
    assert not est.converged_
    J = [r["objective"] for r in est.history_]
    want = max(1e-4, abs(J[-1] - J[-6]) / (5 * J[-1]))
    assert final_rate(est.history_) == pytest.approx(abs(J[-1] - J[-6]) / (5 * J[-1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.update_fit((X0, y0), add=(X1, y1))
    assert est.fit_report().warm_start["tol"] == pytest.approx(want)
    est.update_fit(updated_rows(X0, y0, (X1, y1)), remove=[0], tol=1e-3)
    assert est.fit_report().warm_start["tol"] == 1e-3
    assert est.fit_report().warm_start["rows_added"] == 0


def test_another_path_starts_afresh_and_says_why():
    X0, y0, X1, y1 = _data()
    est = MSVMAv(kernel="rbf", approximation="exact").fit(X0, y0)
    est.set_params(approximation="low_rank", random_state=0)
    est.update_fit((X0, y0), add=(X1, y1))
    report = est.fit_report().warm_start
    assert report["start"] == "mamc" and "path" in report["reason"]
    Xn, yn = updated_rows(X0, y0, (X1, y1))
    cold = MSVMAv(kernel="rbf", approximation="low_rank", random_state=0,
                  gamma=est.gamma_).fit(Xn, yn)
    np.testing.assert_allclose(est.decision_function(Xn), cold.decision_function(Xn))


def test_bad_updates_are_refused_naming_the_argument():
    X0, y0, X1, y1 = _data()
    est = MSVMAv().fit(X0, y0)
    with pytest.raises(ValueError, match="^fitted_rows: an update needs"):
        est.update_fit(None, add=(X1, y1))
    with pytest.raises(ValueError, match="^fitted_rows: the model was fitted on 340 rows"):
        est.update_fit((X0[:300], y0[:300]), add=(X1, y1))
    with pytest.raises(ValueError, match="^fitted_rows: X_fit's column means"):
        est.update_fit((X0[::-1] ** 2, y0), add=(X1, y1))
    with pytest.raises(ValueError, match=r"^remove: indices must be in \[0, 340\)"):
        est.update_fit((X0, y0), add=(X1, y1), remove=[340])
    with pytest.raises(ValueError, match="^remove: an index is given more than once"):
        est.update_fit((X0, y0), add=(X1, y1), remove=[3, 3])
    with pytest.raises(ValueError, match="^y: the updated rows hold the classes"):
        est.update_fit((X0, y0), add=(X1, np.full(len(y1), 7)))
    with pytest.raises(ValueError, match="^add: must be a pair"):
        est.update_fit((X0, y0), add=X1)
    with pytest.raises(NotFittedError):
        MSVMAv().update_fit((X0, y0), add=(X1, y1))
    rbf = MSVMAv(kernel="rbf", approximation="exact").fit(X0, y0)
    with pytest.raises(ValueError, match="^fitted_rows: X_fit is not the rows"):
        rbf.update_fit((X0[::-1], y0), add=(X1, y1))


@pytest.mark.parametrize("warm_folds", [False, True])
def test_a_calibrated_update_fits_its_folds_cold_or_from_the_updated_solution(warm_folds):
    """The out-of-fold decisions of the calibration: with warm_folds, each fold's fit is the
    warm-started fit (warm_start=True) from the updated model's solution; else a cold fit."""
    X0, y0, X1, y1 = _data()
    est = MSVMAv(calibration="sigmoid", random_state=3).fit(X0, y0)
    est.update_fit((X0, y0), add=(X1, y1), warm_folds=warm_folds)
    report = est.fit_report().warm_start
    assert report["calibration_folds"] == ("warm" if warm_folds else "cold")
    Xn, yn = updated_rows(X0, y0, (X1, y1))
    want = np.zeros(yn.size)
    for train, test in calibration_folds(yn, 5, 3).split(np.zeros(yn.size), yn):
        fold = MSVMAv(random_state=3)
        if warm_folds:
            fold.coef_, fold.intercept_ = est.coef_.copy(), est.intercept_.copy()
            fold.set_params(warm_start=True, tol=report["tol"])
        want[test] = fold.fit(Xn[train], yn[train]).decision_function(Xn[test])
    np.testing.assert_allclose(est.oof_decision_, want, rtol=1e-9, atol=1e-12)


def test_a_low_rank_update_keeps_the_feature_map_and_is_the_warm_fit_on_its_kernel():
    """On the low-rank path the parent's pivots stay the feature map phi (no new pivoted
    Cholesky); the update is then the warm-started exact fit of the kernel phi^T phi on the
    updated rows (a precomputed kernel) from the parent's function on them."""
    X0, y0, X1, y1 = _data()
    # a budget just too small for the exact kernel: no fallback at the rank cap
    low = {"kernel": "rbf", "approximation": "low_rank", "n_components": 40,
           "random_state": 0, "max_iter": 30, "kernel_memory_mb": 3.9 * 8 * 340**2 / 2**20}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MSVMAv(**low).fit(X0, y0)
        parent = model_from_dict(est.to_dict())
        assert est.kernel_approximation_ == "low_rank" and est.rank_ <= 40
        est.update_fit((X0, y0), add=(X1, y1), remove=REMOVE)
    report = est.fit_report().warm_start
    assert report["start"] == "parent" and any("fixed feature map" in r
                                               for r in report["reused"])
    np.testing.assert_array_equal(est.X_fit_, parent.X_fit_)
    Xn, yn = updated_rows(X0, y0, (X1, y1), remove=REMOVE)
    kernel, pivots = parent.kernel_, parent.X_fit_
    block = np.linalg.cholesky(kernel.gram(pivots))
    Phi = np.linalg.solve(block, kernel.matrix(pivots, Xn))  # (r, n): phi of each row
    K = Phi.T @ Phi
    W = block.T @ parent.dual_coef_  # the parent's feature weights: f = phi^T W
    np.testing.assert_allclose(Phi.T @ W, parent.decision_function(Xn), atol=1e-8)
    start = Phi.T @ np.linalg.solve(Phi @ Phi.T, W)  # K start = Phi^T W on the rows
    ref = MSVMAv(kernel="precomputed", approximation="exact", max_iter=30)
    ref.dual_coef_, ref.kernel_approximation_ = start, "exact"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.set_params(warm_start=True, tol=report["tol"]).fit(K, yn)
    np.testing.assert_allclose(est.decision_function(Xn), K @ ref.dual_coef_,
                               rtol=1e-7, atol=1e-9)
    assert est.n_iter_ == ref.n_iter_


def test_an_update_keeps_the_exact_path_auto_chose_for_its_parent(monkeypatch):
    """approximation="auto": a parent on the exact kernel is updated on the exact kernel even
    where its updated rows would start a cold fit on the low-rank path."""
    monkeypatch.setattr("solver.msvmav.AUTO_EXACT_ROWS", 340)
    X0, y0, X1, y1 = _data()
    est = MSVMAv(kernel="rbf", max_iter=20).fit(X0, y0)
    assert est.kernel_approximation_ == "exact" and est.kernel_path(416) == "low_rank"
    est.update_fit((X0, y0), add=(X1, y1), remove=REMOVE)
    assert est.kernel_approximation_ == "exact"
    assert est.fit_report().warm_start["start"] == "parent"


def test_sparse_rows_and_rows_of_weight_zero():
    """CSR rows update as dense ones do. On the exact kernel, rows of weight 0 are left out
    of the fit, and so are their coefficients from the start (the same for warm_start=True,
    which before started such a fit cold: the start did not fit the kept rows)."""
    from scipy import sparse

    X0, y0, X1, y1 = _data()
    dense = MSVMAv().fit(X0, y0).update_fit((X0, y0), add=(X1, y1), remove=REMOVE)
    csr = MSVMAv().fit(sparse.csr_matrix(X0), y0)
    csr.update_fit((sparse.csr_matrix(X0), y0), add=(sparse.csr_matrix(X1), y1),
                   remove=REMOVE)
    Xn, yn = updated_rows(X0, y0, (X1, y1), remove=REMOVE)
    np.testing.assert_allclose(csr.decision_function(Xn), dense.decision_function(Xn),
                               rtol=1e-9, atol=1e-12)
    weights = np.ones(yn.size)
    weights[[2, 400]] = 0.0
    est = MSVMAv(kernel="rbf", approximation="exact", max_iter=20, warm_start=True)
    est.fit(X0, y0)
    parent = model_from_dict(est.to_dict())
    est.update_fit((X0, y0), add=(X1, y1), remove=REMOVE, sample_weight=weights)
    ref, _, _ = _independent(parent, X0, y0, X1, y1, est.fit_report().warm_start["tol"],
                             sample_weight=weights)
    np.testing.assert_allclose(est.decision_function(Xn), ref.decision_function(Xn),
                               rtol=1e-8, atol=1e-10)
    assert est.X_fit_.shape[0] == yn.size - 2  # the rows of weight 0 are not terms


def test_a_kept_factorisation_is_released_by_the_next_fit():
    """K and (I + K)^-1 kept for an update are let go when another fit starts (not held
    through its peak), and kept again only by an exact fit that keeps them."""
    X0, y0, _, _ = _data()
    est = MSVMAv(kernel="rbf", approximation="exact", max_iter=5, warm_start=True)
    est.fit(X0, y0)
    assert est._factorisation[0].shape == (340, 340)
    est.set_params(approximation="low_rank", random_state=0, n_components=40,
                   kernel_memory_mb=3.9 * 8 * 340**2 / 2**20)  # no exact fallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X0, y0)
    assert est.kernel_approximation_ == "low_rank" and est._factorisation is None
