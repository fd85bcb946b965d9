"""Probabilities of a model fitted on a real Dask cluster (distributed.LocalCluster, two
worker processes on 127.0.0.1): the calibrator from out-of-fold decision values of folds of
partitions equals the one computed independently here (local fits on the same folds' rows,
scikit-learn's sigmoid and isotonic fits on their values); the evaluation on hold-out
partitions equals scikit-learn's metrics of the gathered predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import _sigmoid_calibration
from sklearn.datasets import make_moons
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss, log_loss

from solver import MSVMAv
from solver.distributed import cluster_evaluation, fit_on_cluster

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.process

ROWS, CHUNK = 1400, 200  # seven partitions: five folds of one or two


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _moons(seed: int, n: int = ROWS):
    X, y = make_moons(n, noise=0.3, random_state=seed)
    return (X - X.min(0)) / (X.max(0) - X.min(0)), y


def _dask(X, y):
    return da.from_array(X, chunks=(CHUNK, X.shape[1])), da.from_array(y, chunks=CHUNK)


def _independent_oof(params: dict, X, y, seed: int) -> np.ndarray:
    """Out-of-fold decision values computed here: the blocks' permutation dealt into five
    folds, each scored by a local fit on the other folds' rows."""
    blocks = np.arange(ROWS) // CHUNK
    order = np.random.default_rng(seed).permutation(ROWS // CHUNK)
    oof = np.empty(ROWS)
    for k in range(5):
        test = np.isin(blocks, order[k::5])
        model = MSVMAv(**params).fit(X[~test], y[~test])
        oof[test] = model.decision_function(X[test])
    return oof


@pytest.mark.parametrize(("kernel", "method"), [("linear", "sigmoid"), ("rbf", "isotonic")])
def test_cluster_calibration_equals_an_independent_one(client, kernel, method):
    X, y = _moons(seed=7)
    # (the low-rank path on both sides: "auto" takes the exact kernel locally below 1,024 rows)
    params = {"kernel": kernel, "gamma": 4.0, "approximation": "low_rank", "n_components": 60,
              "kernel_tol": 1e-3, "max_iter": 8, "random_state": 3}
    remote = fit_on_cluster(MSVMAv(**params, calibration=method), *_dask(X, y),
                            client=client)
    oof = _independent_oof(params, X, y, seed=3)
    [fitted] = remote.calibrator_.params
    if method == "sigmoid":
        a, b = _sigmoid_calibration(oof, y)
        assert fitted["a"] == pytest.approx(a, rel=1e-6)
        assert fitted["b"] == pytest.approx(b, rel=1e-6, abs=1e-9)
    else:
        iso = IsotonicRegression(out_of_bounds="clip").fit(oof, y.astype(float))
        np.testing.assert_allclose(fitted["x"], iso.X_thresholds_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(fitted["y"], iso.y_thresholds_, rtol=1e-12)
    # the label is the most probable class, as a local calibrated model's
    proba = remote.predict_proba(X)
    np.testing.assert_array_equal(remote.predict(X), remote.classes_[proba.argmax(axis=1)])


def test_cluster_evaluation_on_hold_out_partitions_equals_scikit_learn(client):
    X, y = _moons(seed=8)
    Xt, yt = _moons(seed=9, n=1000)
    model = fit_on_cluster(MSVMAv(max_iter=10, calibration="sigmoid"), *_dask(X, y),
                           client=client)
    got = cluster_evaluation(model, *_dask(Xt, yt), client=client)
    proba = model.predict_proba(Xt)
    assert got["n"] == 1000
    assert got["accuracy"] == np.mean(model.predict(Xt) == yt)
    assert got["log_loss"] == pytest.approx(log_loss(yt, proba), rel=1e-12)
    assert got["brier_score"] == pytest.approx(brier_score_loss(yt, proba[:, 1]), rel=1e-12)
    assert np.sum(got["confusion_matrix"]) == 1000
