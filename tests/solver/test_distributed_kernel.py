"""RBF and polynomial MSVMAv on a real Dask cluster (distributed.LocalCluster, two worker
processes on 127.0.0.1) against the local low-rank path: the same model within 1e-9 when the
landmarks come from every row (the local fit itself) or from a sample (the local fit on the
same landmarks); the rank a worker's memory cannot hold refused by name; the training-margin
summary reduced over the blocks equal to ``margin_statistics`` of the gathered margins, its
quantiles within the KLL sketch's stated rank error."""

from __future__ import annotations

import os

import numpy as np
import pytest
from sklearn.datasets import make_moons

from solver import MSVMAv
from solver.distributed import (
    cluster_margin_statistics,
    fit_on_cluster,
    fit_on_landmarks,
)
from solver.internals import cluster_memory, largest_rank
from solver.margins import margin_statistics

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
Worker, plan, worker_memory = (cluster_memory.Worker, cluster_memory.plan,
                               cluster_memory.worker_memory)

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


def _worker(budget_mib: float, threads: int = 1) -> Worker:
    """A worker's reading as ``read_workers`` gives it (its budget given)."""
    return Worker(f"tcp://w{budget_mib}-{threads}", int(budget_mib * 2**20), 200 * 2**20,
                  threads, 2**31, 0.6)


def test_the_memory_plan_takes_the_fastest_way_every_worker_holds():
    """1M rows of 28 features in 20 blocks of 50,000 on two workers (500,000 rows each),
    rank 50: features kept need 8 (28 + 50) 500,000 = 312 MB plus a block's transient
    8 x 50,000 (4 x 28 + 5 x 50) = 145 MB; raw rows 8 x 29 x 500,000 = 116 MB plus the
    same; nothing kept, the block only."""
    sizes = [50_000] * 20
    block = 8 * 50_000 * (4 * 28 + 5 * 50)
    expected = {"features": 8 * 500_000 * 78 + block, "rows": 8 * 500_000 * 29 + block,
                "nothing": block}
    for budget, way in ((480, "features"), (400, "rows"), (200, "nothing")):
        chosen = plan([_worker(budget), _worker(budget + 100)], sizes, 28, 50)
        assert chosen.way == way, (budget, chosen)
        assert chosen.needs == expected
        assert chosen.budget == budget * 2**20  # the binding worker: the smaller budget
    # the blocks are dealt evenly, each worker its own ten
    dealt = plan([_worker(480), _worker(490)], sizes, 28, 50).dealt
    assert sorted(len(v) for v in dealt.values()) == [10, 10]
    # a thread more on a worker: two blocks in flight
    assert plan([_worker(300, threads=2)], sizes, 28, 50).needs["nothing"] == 2 * block
    # a linear fit has no features to keep
    assert plan([_worker(200)], sizes, 28, 0).needs == {
        "rows": 8 * 1_000_000 * 29 + 8 * 50_000 * 112, "nothing": 8 * 50_000 * 112}


def test_a_rank_or_a_way_no_worker_holds_is_refused_by_name():
    sizes = [50_000] * 20
    with pytest.raises(ValueError, match=r"^keep: 'rows' needs 359 MiB on a worker, more "
                                         r"than a worker's budget of 200 MiB"):
        plan([_worker(200)], sizes, 28, 50, keep="rows")
    with pytest.raises(ValueError, match=r"^keep: one of 'auto', 'rows', 'nothing'"):
        plan([_worker(200)], sizes, 28, 0, keep="features")
    # 100 MiB a block of 50,000 rows: 262 floats a row, 112 of them the read's
    cap = int((100 * 2**20 / (8 * 50_000) - 4 * 28) / 5)
    assert largest_rank([_worker(100)], sizes, 28, 2048) == cap == 30
    plan([_worker(100)], sizes, 28, cap)
    with pytest.raises(ValueError, match=rf"^n_components: rank {cap + 1} needs 102 MiB on a "
                       rf"worker even reading every block again.*largest rank that fits is "
                       rf"{cap};"):
        plan([_worker(100)], sizes, 28, cap + 1)
    with pytest.raises(ValueError, match=r"^X: a fit needs 43 MiB on a worker even reading"):
        plan([_worker(40)], sizes, 28, 0)
    # no limit: everything fits, the fastest way
    assert plan([Worker("tcp://w", None, 0, 1, None, 1.0)], sizes, 28, 2048).way == "features"


def test_a_workers_reading_is_its_own(client):
    """Each worker reports its limit, its lowest enabled threshold (Dask's default target,
    0.6) and its resident set size, which includes what it has imported."""
    readings = client.run(worker_memory)
    limits = {w: info["memory_limit"] for w, info in client.scheduler_info()["workers"].items()}
    for address, r in readings.items():
        assert r["limit"] == limits[address]
        assert r["threshold"] == dask.config.get("distributed.worker.memory.target") == 0.6
        assert 50 * 2**20 < r["rss"] < r["limit"]
        assert r["nthreads"] == 1


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



@pytest.mark.parametrize("keep", ["rows", "nothing"])
def test_features_computed_every_pass_give_the_kept_features_fit(client, keep):
    """keep="rows" maps each kept raw block on every pass, keep="nothing" reads each block
    from its graph again on every pass and maps it: the same features, so the same model
    as the kept ones and the local fit on the same landmarks."""
    X, y = _moons(seed=6)
    params = {"kernel": "rbf", "gamma": 6.0, "kernel_tol": 1e-3, "max_iter": 10,
              "random_state": 1}
    kept = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client, sample=400,
                          keep="features")
    per_pass = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client, sample=400,
                              keep=keep)
    assert kept.fit_info_["cluster"]["keep"] == "features"
    assert per_pass.fit_info_["cluster"]["keep"] == keep
    np.testing.assert_array_equal(per_pass.X_fit_, kept.X_fit_)
    _same(kept, per_pass, X)
    local = fit_on_landmarks(MSVMAv(**params), X, y, per_pass.X_fit_,
                             per_pass.landmark_block_)
    _same(local, per_pass, X)


#: the tight cluster's data: 1.2M rows x 4 features (38 MB) in 30 blocks of 40,000, made
#: by the workers from a seeded generator (recomputed, never sent)
TIGHT_ROWS, TIGHT_D, TIGHT_BLOCK, TIGHT_RANK = 1_200_000, 4, 40_000, 6
#: the budget the tight workers' limit leaves (threshold x limit - fixed cost, x HEADROOM):
#: more than a streamed block's 14 MiB, less than a worker's raw rows and block (37 MiB)
TIGHT_BUDGET = 25 * 2**20


def _tight_data():
    rng = da.random.default_rng(46)
    X = rng.random((TIGHT_ROWS, TIGHT_D), chunks=(TIGHT_BLOCK, TIGHT_D))
    y = (((X - 0.5) ** 2).sum(axis=1) < TIGHT_D / 12).astype(int)
    return X, y


@pytest.fixture()
def tight():
    """Two fresh worker processes whose memory limit leaves TIGHT_BUDGET after their fixed
    cost, read from a first worker of the same kind (its resident set once solver is
    imported). (Fresh for each test: a worker's resident set stays up after a fit, and the
    plan reads it as fixed cost.)"""
    HEADROOM = cluster_memory.HEADROOM

    with distributed.LocalCluster(processes=True, n_workers=1, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as probe, \
            distributed.Client(probe) as c:
        fixed = max(r["rss"] for r in c.run(worker_memory).values())
    limit = int((TIGHT_BUDGET / HEADROOM + fixed) / 0.6)
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  memory_limit=limit, host="127.0.0.1",
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _peak_rss(client, run):
    """(run(), the workers' largest resident set size sampled every 0.1 s meanwhile, the
    workers' pids before == after)."""
    import threading

    import psutil

    pids = client.run(os.getpid)
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.wait(0.1):
            rss = client.run(lambda: psutil.Process().memory_info().rss)
            peak[0] = max(peak[0], *rss.values())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        out = run()
    finally:
        stop.set()
        thread.join()
    return out, peak[0], client.run(os.getpid) == pids


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_workers_that_cannot_hold_the_rows_stream_them_under_their_thresholds(tight, kernel):
    """Workers whose budget holds a block but not their share of the raw rows: the plan
    keeps nothing (every pass makes each block again from its graph), no worker passes
    Dask's spill threshold (the first that acts on a process's memory) or restarts, and
    the model is the local one (on the cluster's landmarks for rbf); keep="rows" there is
    refused before any row is loaded."""
    X, y = _tight_data()
    params = ({"kernel": "rbf", "gamma": 2.0, "approximation": "low_rank",
               "n_components": TIGHT_RANK, "kernel_tol": 1e-6, "max_iter": 6,
               "random_state": 0} if kernel == "rbf" else {"max_iter": 8})
    remote, peak, same = _peak_rss(tight, lambda: fit_on_cluster(
        MSVMAv(**params), X, y, client=tight, sample=2000))
    plan_info = remote.fit_info_["cluster"]
    assert plan_info["keep"] == "nothing", plan_info
    assert plan_info["needs_mib"]["rows"] > plan_info["budget_mib"] \
        >= plan_info["needs_mib"]["nothing"]
    limit = plan_info["limit_mib"] * 2**20
    assert same, "a worker was restarted"
    assert peak < dask.config.get("distributed.worker.memory.spill") * limit, (peak, limit)
    Xl, yl = X.compute(), y.compute()
    local = (fit_on_landmarks(MSVMAv(**params), Xl, yl, remote.X_fit_, remote.landmark_block_)
             if kernel == "rbf" else MSVMAv(**params).fit(Xl, yl))
    _same(local, remote, Xl[:50_000])
    with pytest.raises(ValueError, match=r"^keep: 'rows' needs \d+ MiB on a worker, more "
                                         r"than a worker's budget"):
        fit_on_cluster(MSVMAv(**params), X, y, client=tight, keep="rows")
