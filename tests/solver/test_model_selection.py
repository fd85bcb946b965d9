"""Cross-validation over grids: equal to a plain loop of fits on the same folds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_classification

from solver.comparators import iter_configs
from solver.internals import batched_msvmav as bm
from solver.model_selection import (
    cross_validate_grid,
    kfold_indices,
    make_estimator,
    n_cells,
    resolve_grid,
)
from solver.msvmav import MSVMAv


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=120, n_features=5, n_informative=3, flip_y=0.1,
                               random_state=3)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    return X, np.where(y == 1, "yes", "no")


def naive_scores(algorithm, X, y, kernel, grid, fixed=None, cv=5, seed=0):
    rows = []
    for params in iter_configs(grid):
        rows.append([make_estimator(algorithm, params, kernel=kernel, fixed=fixed)
                     .fit(X[tr], y[tr]).score(X[te], y[te])
                     for tr, te in kfold_indices(len(y), cv, seed)])
    return np.array(rows)


def table_scores(res):
    return np.array([row["scores"] for row in res.table])


@pytest.mark.parametrize("algorithm,kernel,grid,fixed", [
    ("msvmav", "linear", "quick", None),
    ("msvmav", "rbf", {"alpha": [1.0, 16.0], "beta": [0.25], "gamma": [0.2, 5.0]}, None),
    ("svm", "linear", "quick", {"random_state": 0}),
    ("lssvm", "rbf", {"C": [0.25, 4.0], "gamma": [0.2, 5.0]}, None),
    ("odm", "rbf", {"C": [1.0], "mu": [0.8], "theta": [0.2], "gamma": [0.5]},
     {"random_state": 0}),
])
def test_table_equals_naive_loop(data, algorithm, kernel, grid, fixed):
    X, y = data
    res = cross_validate_grid(algorithm, X, y, kernel=kernel, grid=grid, n_jobs=1, params=fixed)
    g = resolve_grid(algorithm, grid, kernel=kernel, n_features=X.shape[1])
    expected = naive_scores(algorithm, X, y, kernel, g, fixed)
    np.testing.assert_array_equal(table_scores(res), expected)
    means = expected.mean(axis=1)
    assert res.best_index == int(np.argmax(means))
    assert res.best_score == pytest.approx(means.max())
    row = res.table[0]
    assert set(row) == {"params", "mean_accuracy", "std", "scores", "fit_seconds"}
    assert row["std"] == pytest.approx(np.std(expected[0], ddof=1))


def test_parallel_equals_serial(data):
    X, y = data
    a = cross_validate_grid("msvmav", X, y, grid="quick", n_jobs=1)
    b = cross_validate_grid("msvmav", X, y, grid="quick", n_jobs=2)
    np.testing.assert_array_equal(table_scores(a), table_scores(b))
    c = cross_validate_grid("lssvm", X, y, kernel="rbf", grid="quick", n_jobs=2)
    d = cross_validate_grid("lssvm", X, y, kernel="rbf", grid="quick", n_jobs=1)
    np.testing.assert_array_equal(table_scores(c), table_scores(d))
    assert [r["params"] for r in c.table] == [r["params"] for r in d.table]


def test_grid_sizes():
    assert len(iter_configs(resolve_grid("msvmav", "paper", n_features=7))) == 121
    assert len(iter_configs(resolve_grid("svm", "paper", n_features=7))) == 11
    assert len(iter_configs(resolve_grid("svm", "paper", kernel="rbf", n_features=7))) == 121
    assert len(iter_configs(resolve_grid("msvmav", "quick", n_features=7))) == 9
    assert n_cells("odm", 7, grid="paper", cv=5) == 176 * 5
    with pytest.raises(ValueError, match="algorithm"):
        resolve_grid("nope", "paper", n_features=3)
    with pytest.raises(ValueError, match="grid"):
        resolve_grid("svm", "huge", n_features=3)


def test_progress_and_abort(data):
    X, y = data
    seen = []
    res = cross_validate_grid("svm", X, y, grid="quick", n_jobs=1,
                              callback=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (15, 15) and all(t == 15 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert res.to_dict()["best_params"] == res.best_params

    class StopError(Exception):
        pass

    def stop(done, total):
        raise StopError

    for n_jobs in (1, 2):
        with pytest.raises(StopError):
            cross_validate_grid("msvmav", X, y, grid="quick", n_jobs=n_jobs, callback=stop)


class StopSearchError(Exception):
    pass


@pytest.mark.parametrize("algorithm,kernel", [("msvmav", "linear"), ("msvmav", "rbf"),
                                              ("svm", "linear")])
def test_in_process_callback_runs_inside_tasks_and_can_abort_them(data, algorithm, kernel):
    X, y = data
    seen = []
    cross_validate_grid(algorithm, X, y, kernel=kernel, grid="quick", cv=2, n_jobs=1,
                        callback=lambda d, t: seen.append(d))
    finished = sorted(set(seen) - {0})
    assert seen[0] == 0 and len(seen) >= 2 * len(finished)  # also called inside the tasks
    if algorithm != "msvmav":
        return  # (one quick fit per task: the calls come before each fit)
    calls = []

    def stop_on_third(done, total):
        calls.append(done)
        if len(calls) == 3:
            raise StopSearchError

    with pytest.raises(StopSearchError):
        cross_validate_grid(algorithm, X, y, kernel=kernel, grid="quick", cv=2, n_jobs=1,
                            callback=stop_on_third)
    assert calls == [0, 0, 0]  # the first task was abandoned part way


def test_worker_pool_callback_polls_while_tasks_run(data, monkeypatch):
    import solver.parallel

    monkeypatch.setattr(solver.parallel, "POLL", 0.001)
    X, y = data
    seen = []
    res = cross_validate_grid("msvmav", X, y, kernel="rbf", grid="quick", cv=2, n_jobs=2,
                              callback=lambda d, t: seen.append(d))
    total = 2 * len(res.table)
    assert seen[-1] == total and seen == sorted(seen)
    assert len(seen) > len(set(seen))  # the same count again while waiting


@pytest.mark.parametrize("as_sparse,budget", [(False, None), (True, None), (True, 0)])
def test_batched_linear_msvmav_matches_single_fits(monkeypatch, as_sparse, budget):
    """The lockstep engine against MSVMAv, on each of its Gram-update routes."""
    X, y = make_classification(n_samples=150, n_features=8, random_state=1)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    X[X < 0.3] = 0.0  # some sparsity
    if as_sparse:
        X = sparse.csr_matrix(X)
    if budget is not None:
        monkeypatch.setattr(bm, "PAIR_BUDGET", budget)
    ypm = np.where(y == 1, 1.0, -1.0)
    settings = [(2.0**-10, 2.0**-10), (1.0, 0.25), (16.0, 2.0**-6), (1024.0, 2.0**-10),
                (2.0**-4, 1024.0)]
    W, n_iter = bm.fit_linear_batch(X, ypm, [a for a, _ in settings],
                                    [b for _, b in settings])
    for (a, b), w, k in zip(settings, W, n_iter, strict=True):
        # fit_linear_batch's default rule is the paper's (the search passes the estimator's)
        est = MSVMAv(alpha=a, beta=b, stop="step", tol=1e-8).fit(X, y)
        np.testing.assert_allclose(w, np.r_[est.coef_.ravel(), est.intercept_], atol=1e-9)
        assert k == est.n_iter_
    W0, _ = bm.fit_linear_batch(X, ypm, [1.0], [1.0], max_iter=0)
    est = MSVMAv(max_iter=0).fit(X, y)
    np.testing.assert_allclose(W0[0], np.r_[est.coef_.ravel(), est.intercept_], atol=1e-12)


def test_linear_msvmav_table_does_not_depend_on_n_jobs():
    # alpha=10, beta=0 oscillates on these data: the lockstep batches' rounding decided its
    # accuracy when the batches were sized by n_jobs (0.824 with one worker, 0.725 with two)
    X, y = make_classification(n_samples=3000, n_features=40, n_informative=10, flip_y=0.1,
                               random_state=5)
    X, y = X[:1500], y[:1500]
    grid = {"alpha": [0.1, 1.0, 10.0], "beta": [0.0, 1.0, 4.0, 8.0]}
    tables = [[(r["params"], r["scores"]) for r in cross_validate_grid(
        "msvmav", X, y, grid=grid, cv=4, n_jobs=n_jobs).table] for n_jobs in (1, 2, 3)]
    assert tables[0] == tables[1] == tables[2]


def test_linear_grid_may_leave_beta_out():
    """A grid over alpha alone takes beta from params (or MSVMAv's default): the lockstep
    batch used to raise KeyError: 'beta'. Its accuracies equal one fit per setting."""
    rng = np.random.default_rng(3)
    X = rng.random((90, 4))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0.65).astype(int)
    search = cross_validate_grid("msvmav", X, y, grid={"alpha": [1, 16]}, cv=3, n_jobs=1,
                                 params={"beta": 0.5})
    folds = kfold_indices(len(y), 3, random_state=0)
    for row in search.table:
        est = MSVMAv(alpha=row["params"]["alpha"], beta=0.5)
        expected = [est.fit(X[tr], y[tr]).score(X[te], y[te]) for tr, te in folds]
        np.testing.assert_allclose(row["scores"], expected, atol=1e-12)
