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
from solver.internals import OBJECTIVE_WINDOW, UPDATE_WINDOW
from solver.kernels import make_kernel
from solver.scaling import MinMaxScaling

REMOVE = [0, 5, 7, 123]


def _data(n: int = 420, classes: int = 2):
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=classes, n_clusters_per_class=1, random_state=0)
    X = MinMaxScaling.fit(X).transform(X)
    return X[:340], y[:340], X[340:], y[340:]


def _independent(parent: MSVMAv, X0, y0, X1, y1, tol: float, sample_weight=None,
                 n_iter: int | None = None):
    """The warm-started fit of the updated rows, from a restored copy of the parent, and its
    start's decisions on them; with ``n_iter``, exactly that many iterations (tol 0; the
    update's own rule, judged from its start over UPDATE_WINDOW, is checked on its history
    by ``_check_update_rule``)."""
    ref = model_from_dict(parent.to_dict())
    keep = np.setdiff1d(np.arange(len(y0)), REMOVE)
    Xn, yn = np.vstack([X0[keep], X1]), np.r_[y0[keep], y1]
    if ref.kernel != "linear":  # the same function on the kept rows, 0 on the added ones
        dual = np.atleast_2d(ref.dual_coef_.T).T
        start = np.zeros((yn.size, dual.shape[1]))
        start[: keep.size] = dual[keep]
        ref.dual_coef_ = start[:, 0] if start.shape[1] == 1 else start
        ref.set_params(gamma=parent.gamma_)
        f0 = parent.kernel_.matrix(Xn, Xn) @ start
    else:
        f0 = parent.decision_function(Xn)
    if n_iter is not None:
        ref.set_params(tol=0.0, max_iter=int(n_iter))
    else:
        ref.set_params(tol=tol)
    ref.set_params(warm_start=True).fit(Xn, yn, sample_weight=sample_weight)
    return ref, Xn, yn, np.atleast_2d(f0.T).T


def _objective(y, f):
    """J = SV / theta^2 of the margins y f (scale-invariant: any multiple of f)."""
    m = y * f
    theta = m.mean()
    return np.mean(np.maximum(theta - m, 0.0) ** 2) / theta**2


def _targets(classes, y) -> np.ndarray:
    """The +-1 target of each one-vs-rest task, (n, T)."""
    if classes.size == 2:
        return np.where(y == classes[1], 1.0, -1.0)[:, None]
    return np.stack([np.where(y == c, 1.0, -1.0) for c in classes], axis=1)


def _rule_iterations(history, Y, F0, tol: float, max_iter: int) -> list[int]:
    """Per task, where the update's rule is first met: |J_k - J_{k-2}| <= 2 tol J_k over
    J_1..J_k with J_0 the start's objective (from its decisions F0), else max_iter."""
    out = []
    for t in range(Y.shape[1]):
        J = np.array([_objective(Y[:, t], F0[:, t]),
                      *[r["objective"] for r in history if r["task"] == t]])
        W = UPDATE_WINDOW
        met = [k for k in range(W, J.size) if abs(J[k] - J[k - W]) <= W * tol * J[k]]
        out.append(met[0] if met else max_iter)
    return out


def _check_update_rule(est: MSVMAv, Y, F0, tol: float) -> None:
    """Each task of the update stopped where its rule is first met, or ran to max_iter."""
    ran = [sum(r["task"] == t for r in est.history_) for t in range(Y.shape[1])]
    assert _rule_iterations(est.history_, Y, F0, tol, est.max_iter) == ran
    assert est.converged_ == all(k < est.max_iter for k in ran)


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
        Xn, yn = updated_rows(X0, y0, (X1, y1), remove=REMOVE)
        want = np.atleast_2d(est.decision_function(Xn).T).T.copy()
        ran = [sum(r["task"] == t for r in est.history_) for t in range(want.shape[1])]
        for k in set(ran):  # each task's iterations from the same start, exactly
            ref, _, _, F0 = _independent(parent, X0, y0, X1, y1, report["tol"], n_iter=k)
            got = np.atleast_2d(ref.decision_function(Xn).T).T
            tasks = [t for t in range(want.shape[1]) if ran[t] == k]
            np.testing.assert_allclose(want[:, tasks], got[:, tasks], rtol=1e-8, atol=1e-10)
    _check_update_rule(est, _targets(est.classes_, yn), F0, report["tol"])
    assert report["start"] == "parent" and report["window"] == UPDATE_WINDOW
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
    want = max(est.tol, abs(J[-1] - J[-6]) / (5 * J[-1]))
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
        if warm_folds:  # the update's rule, from the updated solution: found on a long run
            fold.coef_, fold.intercept_ = est.coef_.copy(), est.intercept_.copy()
            run = clone_start(fold).set_params(warm_start=True, tol=0.0).fit(Xn[train],
                                                                              yn[train])
            (k,) = _rule_iterations(run.history_, _targets(est.classes_, yn[train]),
                                    est.decision_function(Xn[train])[:, None],
                                    report["tol"], fold.max_iter)
            fold.set_params(warm_start=True, tol=0.0, max_iter=k)
        want[test] = fold.fit(Xn[train], yn[train]).decision_function(Xn[test])
    np.testing.assert_allclose(est.oof_decision_, want, rtol=1e-9, atol=1e-12)


def clone_start(model: MSVMAv) -> MSVMAv:
    """A copy of an unfitted model with its start (coef_, intercept_) set by hand."""
    copy = MSVMAv(**model.get_params())
    copy.coef_, copy.intercept_ = model.coef_.copy(), model.intercept_.copy()
    return copy


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
    ref = MSVMAv(kernel="precomputed", approximation="exact", max_iter=est.n_iter_)
    ref.dual_coef_, ref.kernel_approximation_ = start, "exact"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.set_params(warm_start=True, tol=0.0).fit(K, yn)
    np.testing.assert_allclose(est.decision_function(Xn), K @ ref.dual_coef_,
                               rtol=1e-7, atol=1e-9)
    # its iterations: where the update's rule, from the parent's function, is first met
    _check_update_rule(est, _targets(est.classes_, yn),
                       parent.decision_function(Xn)[:, None], report["tol"])


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
    ref, _, _, _ = _independent(parent, X0, y0, X1, y1, est.fit_report().warm_start["tol"],
                                sample_weight=weights, n_iter=est.n_iter_)
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


def test_an_update_of_a_converged_parent_is_judged_from_its_start():
    """Issue 48: an update's rule counts from its start (the parent's solution), over
    UPDATE_WINDOW iterations; with the fit's window of 5 every update took 6 iterations at
    least. A converged linear parent updated for 10 rows stops after 2, as its rule says, with
    the labels of a cold fit of the same rows."""
    X0, y0, X1, y1 = _data()
    est = MSVMAv().fit(X0, y0)
    parent = model_from_dict(est.to_dict())
    assert est.converged_
    est.update_fit((X0, y0), add=(X1[:10], y1[:10]), measure_cold=True)
    Xn, yn = updated_rows(X0, y0, (X1[:10], y1[:10]))
    assert est.converged_ and est.n_iter_ == UPDATE_WINDOW < OBJECTIVE_WINDOW + 1
    _check_update_rule(est, _targets(est.classes_, yn), parent.decision_function(Xn)[:, None],
                       est.fit_report().warm_start["tol"])
    cold = est.fit_report().warm_start["cold"]
    assert cold["n_iter"] > 2 * est.n_iter_ and cold["agreement"] >= 0.99
