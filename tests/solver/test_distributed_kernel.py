"""RBF and polynomial MSVMAv on a real Dask cluster (distributed.LocalCluster, two worker
processes on 127.0.0.1) against the local low-rank path: the same model within 1e-9 when the
landmarks come from every row (the local fit itself) or from a sample (the local fit on the
same landmarks); the rank a worker's memory cannot hold refused by name; the training-margin
summary reduced over the blocks equal to ``margin_statistics`` of the gathered margins, its
quantiles within the KLL sketch's stated rank error."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_moons

from solver import MSVMAv
from solver.distributed import (
    check_rank_fits,
    cluster_margin_statistics,
    fit_on_cluster,
    fit_on_landmarks,
)
from solver.internals import largest_rank
from solver.margins import margin_statistics

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.process

ROWS, CHUNK = 1200, 500  # three blocks, the last one short; above AUTO_EXACT_ROWS (1024)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _moons(seed: int = 0, n: int = ROWS):
    X, y = make_moons(n, noise=0.25, random_state=seed)
    return (X - X.min(0)) / (X.max(0) - X.min(0)), y


def _dask(X, y):
    return da.from_array(X, chunks=(CHUNK, X.shape[1])), da.from_array(y, chunks=CHUNK)


def _same(a: MSVMAv, b: MSVMAv, X) -> None:
    da_, db = a.decision_function(X), b.decision_function(X)
    assert np.max(np.abs(da_ - db)) <= 1e-9 * np.max(np.abs(da_))
    assert a.n_iter_ == b.n_iter_
    assert [r["active"] for r in a.history_] == [r["active"] for r in b.history_]
    assert a.rank_ == b.rank_


def test_rbf_on_every_row_is_the_local_fit(client):
    """The sample is every row: the landmarks are the local fit's pivots."""
    X, y = _moons()
    params = {"kernel": "rbf", "gamma": 5.0, "kernel_tol": 1e-3, "max_iter": 15,
              "random_state": 0}
    local = MSVMAv(**params).fit(X, y)
    remote = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client)
    assert local.kernel_approximation_ == remote.kernel_approximation_ == "low_rank"
    assert remote.fit_info_["rank_choice"] == local.fit_info_["rank_choice"] == "tol"
    _same(local, remote, X)
    np.testing.assert_allclose(remote.X_fit_, local.X_fit_)
    assert remote.kernel_error_ == pytest.approx(local.kernel_error_, rel=1e-6)
    assert remote.fit_info_["cluster"]["blocks"] == 3


def test_poly_multiclass_with_gamma_scale_is_the_local_fit(client):
    X, y = _moons(seed=1)
    labels = np.array(["a", "b", "c"])[np.minimum((X[:, 0] * 3).astype(int), 2)]
    params = {"kernel": "poly", "degree": 3, "kernel_tol": 1e-4, "max_iter": 12,
              "random_state": 1}
    local = MSVMAv(**params).fit(X, labels)
    remote = fit_on_cluster(MSVMAv(**params), *_dask(X, labels), client=client)
    assert remote.gamma_ == pytest.approx(local.gamma_, rel=1e-12)
    _same(local, remote, X)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))


def test_landmarks_from_a_sample_give_the_local_fit_on_them(client):
    X, y = _moons(seed=2)
    params = {"kernel": "rbf", "gamma": 8.0, "kernel_tol": 1e-3, "max_iter": 12,
              "random_state": 3}
    remote = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client, sample=300)
    assert remote.fit_info_["sample_rows"] == 300
    # the landmarks are rows of X, drawn from the whole of it
    assert all(np.any(np.all(row == X, axis=1)) for row in remote.X_fit_)
    local = fit_on_landmarks(MSVMAv(**params), X, y, remote.X_fit_, remote.landmark_block_)
    _same(local, remote, X)
    # the trace error is that of every row, not of the sample
    phi = np.linalg.solve(remote.landmark_block_,
                          np.exp(-8.0 * ((remote.X_fit_[:, None] - X[None]) ** 2).sum(-1)))
    assert remote.kernel_error_ == pytest.approx(1 - np.sum(phi * phi) / ROWS, rel=1e-8)


def test_a_rank_a_workers_memory_cannot_hold_is_refused_by_name():
    """1M rows of 28 features on a worker of 1 GiB: 0.6 GiB / 8 MB = 80 floats a row, 28 of
    them the raw row's."""
    assert largest_rank(1_000_000, 2**30, 28) == int(0.6 * 2**30 / 8e6) - 28 == 52
    check_rank_fits(52, 1_000_000, 2**30, 28)
    with pytest.raises(ValueError, match=r"^n_components: rank 53 needs 618 MiB.*largest "
                                         r"rank that fits is 52"):
        check_rank_fits(53, 1_000_000, 2**30, 28)
    check_rank_fits(2048, 1_000_000, None, 28)  # no limit: the cluster's cap only


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_the_summary_reduced_over_blocks_equals_the_local_one(client, kernel):
    X, y = _moons(seed=4)
    params = {"kernel": kernel, "max_iter": 20, "random_state": 0}
    model = MSVMAv(**params).fit(X, y)
    local = model.margins(X, y)
    remote = cluster_margin_statistics(model, *_dask(X, y), client=client)
    for key in ("n", "min", "max", "frac_nonpositive", "accuracy", "radius", "histogram"):
        assert remote[key] == local[key], key
    for key in ("mean", "semivariance", "sv_ratio", "variance", "std", "rademacher_bound"):
        assert remote[key] == pytest.approx(local[key], rel=1e-12), key
    np.testing.assert_allclose(remote["cdf"]["x"], local["cdf"]["x"], rtol=1e-15)
    assert remote["cdf"]["p"] == local["cdf"]["p"]
    # each quantile's rank among the margins within the sketch's stated error of its level
    m = np.sort(model._margins_of(model.decision_function(X), y))
    eps = remote["quantile_rank_error"]
    assert 0 < eps < 0.01
    for level, value in remote["quantiles"].items():
        lo = np.searchsorted(m, value, side="left") / m.size
        hi = np.searchsorted(m, value, side="right") / m.size
        assert lo - eps <= int(level) / 100 <= hi + eps, level
    assert margin_statistics(m)["quantiles"].keys() == remote["quantiles"].keys()



def test_features_computed_every_pass_give_the_kept_features_fit(client):
    """keep_features=False maps each raw block on every pass instead of keeping its
    features: the same features, so the same model as the kept ones and the local fit on
    the same landmarks."""
    X, y = _moons(seed=6)
    params = {"kernel": "rbf", "gamma": 6.0, "kernel_tol": 1e-3, "max_iter": 10,
              "random_state": 1}
    kept = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client, sample=400,
                          keep_features=True)
    per_pass = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client, sample=400,
                              keep_features=False)
    assert kept.fit_info_["cluster"]["features"] == "kept"
    assert per_pass.fit_info_["cluster"]["features"] == "per_pass"
    np.testing.assert_array_equal(per_pass.X_fit_, kept.X_fit_)
    _same(kept, per_pass, X)
    local = fit_on_landmarks(MSVMAv(**params), X, y, per_pass.X_fit_,
                             per_pass.landmark_block_)
    _same(local, per_pass, X)


def test_features_a_workers_memory_cannot_keep_are_computed_every_pass():
    """Workers whose memory limit keeps their raw rows but not a rank-12 copy of them
    (24,000 rows x 10 features in 48 blocks; 2.5 MB a worker: 0.6 of it is 187,500 floats,
    a kept rank at most 187,500 / 12,000 - 10 = 5): the fit computes the features on every
    pass, a block at a time, and is the local fit on its landmarks. (Dask's own memory
    management is switched off: the limit is what the fit plans by, not what it runs in.)"""
    rng = np.random.default_rng(11)
    X = rng.random((24_000, 10))
    y = (((X - 0.5) ** 2).sum(axis=1) < 10 / 12).astype(int)
    params = {"kernel": "rbf", "gamma": 0.5, "approximation": "low_rank", "n_components": 12,
              "kernel_tol": 1e-6, "max_iter": 6, "random_state": 0}
    off = {f"distributed.worker.memory.{k}": False
           for k in ("target", "spill", "pause", "terminate")}
    # (workers in this process: their limits are what the plan reads, and nothing is copied)
    with dask.config.set(off), distributed.LocalCluster(
            processes=False, n_workers=2, threads_per_worker=1, memory_limit=2_500_000,
            dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as small:
        remote = fit_on_cluster(MSVMAv(**params), da.from_array(X, chunks=(500, 10)),
                                da.from_array(y, chunks=500), client=small, sample=2000)
    assert remote.fit_info_["cluster"]["features"] == "per_pass", remote.fit_info_["cluster"]
    assert remote.fit_info_["cluster"]["rank_cap"] >= 12
    local = fit_on_landmarks(MSVMAv(**params), X, y, remote.X_fit_, remote.landmark_block_)
    _same(local, remote, X)
