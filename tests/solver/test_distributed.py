"""A linear MSVMAv fitted on a real Dask cluster (distributed.LocalCluster, two worker processes,
one thread each, on 127.0.0.1) against the same fit in this process: equal decisions, a worker
killed mid-fit, a stop that cancels the cluster's tasks, the parameters it refuses."""

from __future__ import annotations

import os
import signal
from contextlib import suppress

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_classification
from sklearn.preprocessing import MinMaxScaler

from solver import MSVMAv
from solver.distributed import fit_on_cluster
from solver.internals import FitStopped
from tests.wait_support import wait_until

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.process

ROWS, CHUNK = 600, 110  # six blocks, the last one short


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _data(n_classes: int = 2, features: int = 8, seed: int = 0):
    X, y = make_classification(n_samples=ROWS, n_features=features, n_informative=5,
                               n_classes=n_classes, flip_y=0.05, random_state=seed)
    return MinMaxScaler().fit_transform(X), y


def _dask(X, y, csr: bool = False):
    Xd = da.from_array(X, chunks=(CHUNK, X.shape[1]))
    if csr:
        Xd = Xd.map_blocks(sparse.csr_matrix, meta=sparse.csr_matrix((0, 0)))
    return Xd, da.from_array(y, chunks=CHUNK)


def _assert_same_model(local: MSVMAv, remote: MSVMAv, X) -> None:
    a, b = local.decision_function(X), remote.decision_function(X)
    assert np.max(np.abs(a - b)) <= 1e-9 * np.max(np.abs(a))
    np.testing.assert_array_equal(local.classes_, remote.classes_)
    assert remote.n_iter_ == local.n_iter_
    assert len(remote.history_) == len(local.history_)
    assert [r["active"] for r in remote.history_] == [r["active"] for r in local.history_]
    np.testing.assert_allclose(remote.feature_means_, local.feature_means_, rtol=1e-12)
    assert remote.n_features_in_ == local.n_features_in_
    assert remote.converged_ == local.converged_ and not remote.stopped_early_


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_dense_blocks_equal_the_local_fit(client, fit_intercept):
    X, y = _data()
    params = {"max_iter": 30, "fit_intercept": fit_intercept}
    local = MSVMAv(**params).fit(X, y)
    remote = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client)
    _assert_same_model(local, remote, X)
    assert remote.linear_solver_ == "dense" and remote.fit_info_["cluster"]["blocks"] == 6


@pytest.mark.parametrize("solver", ["auto", "cg"])
def test_csr_blocks_equal_the_local_fit(client, solver):
    X, y = _data(seed=1)
    X[X < 0.4] = 0.0  # sparse rows
    params = {"max_iter": 20, "linear_solver": solver}
    local = MSVMAv(**params).fit(sparse.csr_matrix(X), y)
    remote = fit_on_cluster(MSVMAv(**params), *_dask(X, y, csr=True), client=client)
    _assert_same_model(local, remote, X)
    assert remote.linear_solver_ == ("cg" if solver == "cg" else "dense")


def test_multiclass_equals_the_local_fit(client):
    X, y = _data(n_classes=3, seed=2)
    labels = np.array(["ant", "bee", "cat"])[y]
    local = MSVMAv(max_iter=15).fit(X, labels)
    remote = fit_on_cluster(MSVMAv(max_iter=15), *_dask(X, labels), client=client)
    _assert_same_model(local, remote, X)
    assert remote.coef_.shape == (3, 8) and {r["task"] for r in remote.history_} == {0, 1, 2}


def test_a_worker_killed_mid_fit_gives_the_same_model(client):
    X, y = _data(seed=3)
    local = MSVMAv(max_iter=12).fit(X, y)
    pids = client.run(os.getpid)
    victim = next(iter(pids))
    killed = []

    def kill_at_iteration_2(info):
        if info.get("stage") is None and info["iteration"] == 2 and not killed:
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)

    remote = fit_on_cluster(MSVMAv(max_iter=12), *_dask(X, y), client=client,
                            callback=kill_at_iteration_2)
    assert killed
    # the scheduler saw the worker leave (its nanny starts a new one)
    log = client.run_on_scheduler(
        lambda dask_scheduler: [e for e in dask_scheduler.get_events("all")
                                if isinstance(e[1], dict) and e[1].get("action") == "remove-worker"
                                and e[1].get("worker") == victim])
    assert log
    _assert_same_model(local, remote, X)
    client.wait_for_workers(2, timeout=60)


def _outstanding(dask_scheduler) -> int:
    """The fit's tasks the scheduler still means to run (queued, waiting, processing, no
    worker); the tests' own blockers ("hold-...") apart."""
    return sum(ts.state in ("processing", "queued", "waiting", "no-worker")
               for key, ts in dask_scheduler.tasks.items() if not str(key).startswith("hold"))


def _outstanding_tasks(dask_scheduler) -> list[tuple[str, str]]:
    """(key, state) of the tasks ``_outstanding`` counts."""
    return [(str(key), ts.state) for key, ts in dask_scheduler.tasks.items()
            if ts.state in ("processing", "queued", "waiting", "no-worker")
            and not str(key).startswith("hold")]


def _settled(client, before: set[str], timeout: float = 30.0) -> list[tuple[str, str]]:
    """The outstanding tasks not in ``before`` (those of an earlier test: see the module's
    known leak below) once there are none, or when ``timeout`` has passed. A cancel travels on
    the client's batched stream, a run_on_scheduler on a comm of its own: asked at once, the
    scheduler may not have read the cancel yet."""
    def left() -> list[tuple[str, str]]:
        return [t for t in client.run_on_scheduler(_outstanding_tasks) if t[0] not in before]

    with suppress(AssertionError):  # (the caller asserts on what is left)
        wait_until(lambda: not left(), timeout=timeout, interval=0.05)
    return left()


def _keys_outstanding(client) -> set[str]:
    """Known leak: a worker killed mid-pass can leave that pass's gram_stats tasks in the
    scheduler ("no-worker", "waiting"), seen after test_a_worker_killed... on two of five
    fresh-clone runs; the tests below count only their own fit's tasks."""
    return {key for key, _ in client.run_on_scheduler(_outstanding_tasks)}


def _hold(name: str) -> None:
    distributed.Event(name).wait(60)


def test_fit_stopped_mid_pass_cancels_the_clusters_tasks(client):
    """After iteration 2's record each worker's one thread is taken by a task waiting on an
    event, so the next pass's tasks are still to run when the callback raises FitStopped at
    that pass's first progress record."""
    X, y = _data(seed=4)
    before = _keys_outstanding(client)
    seen: dict = {}
    release = distributed.Event("hold-release", client=client)
    holds = []

    def stop_mid_pass(info):
        if info.get("stage") is None and info["iteration"] == 2:
            holds.extend(client.submit(_hold, "hold-release", key=f"hold-{w}", workers=[w])
                         for w in client.scheduler_info()["workers"])
        elif info.get("stage") == "cluster_pass" and info["iteration"] == 2:
            seen["outstanding"] = client.run_on_scheduler(_outstanding)
            raise FitStopped

    try:
        with pytest.raises(FitStopped):
            fit_on_cluster(MSVMAv(max_iter=10), *_dask(X, y), client=client,
                           callback=stop_mid_pass)
        after = _settled(client, before)  # before the holds go: a pass not cancelled would wait
    finally:
        release.set()
        distributed.wait(holds)
    assert seen["outstanding"] > 0  # the pass was still to run when the callback raised
    assert after == []


def test_fit_stopped_at_an_iteration_stops_as_a_local_fit(client):
    X, y = _data(seed=5)
    before = _keys_outstanding(client)

    def stop_at_3(info):
        return info.get("stage") is None and info["iteration"] == 3

    local = MSVMAv(max_iter=10).fit(X, y, callback=stop_at_3)
    remote = fit_on_cluster(MSVMAv(max_iter=10), *_dask(X, y), client=client,
                            callback=stop_at_3)
    assert remote.stopped_early_ and local.stopped_early_ and remote.n_iter_ == 3
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=1e-9, atol=1e-12)
    assert _settled(client, before) == []


@pytest.mark.parametrize(("params", "name", "words"), [
    ({"kernel": "precomputed"}, "kernel", "linear, rbf or poly"),
    ({"kernel": "rbf", "approximation": "nystroem"}, "approximation", "'auto' or 'low_rank'"),
    ({"linear_solver": "woodbury"}, "linear_solver", "linear only"),
    ({"class_weight": "balanced"}, "class_weight", "no weighted form")])
def test_what_the_cluster_cannot_fit_is_refused_by_name(client, params, name, words):
    X, y = _data()
    with pytest.raises(ValueError, match=rf"^{name}: .*{words}"):
        fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client)
