"""Searches and experiments on a real Dask cluster (distributed.LocalCluster with two worker
processes on 127.0.0.1): the same tables as local runs, cancel, a worker killed mid-search, an
unreachable scheduler."""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress

import pytest
from sklearn.datasets import make_classification

from solver.experiments import run_experiment
from solver.model_selection import cross_validate_grid, n_cells
from solver.parallel import SchedulerUnreachableError, dask_client, dask_cluster, run_tasks
from tests.wait_support import wait_until

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as c:
        yield c


@pytest.fixture(scope="module")
def data():
    return make_classification(n_samples=240, n_features=8, n_informative=5, random_state=3)


@pytest.fixture(scope="module")
def slow_data():
    # linear MSVMAv on the paper grid: tasks of about a second each on this size
    return make_classification(n_samples=3000, n_features=40, n_informative=10, flip_y=0.1,
                               random_state=5)


def _table(result):
    return [{k: v for k, v in row.items() if k != "fit_seconds"} for row in result.table]


def _experiment(result):
    out = result.to_dict()
    out.pop("seconds")
    for rec in out["algorithms"].values():
        rec.pop("seconds")
    return out


def _scheduler_tasks(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))


def _cluster_tasks(client) -> int:
    """Tasks the scheduler and the workers hold (queued, running, or cancelled but running)."""
    on_workers = client.run(lambda dask_worker: len(dask_worker.state.tasks))
    return _scheduler_tasks(client) + sum(on_workers.values())


@pytest.mark.parametrize("algorithm,kernel", [("msvmav", "linear"), ("lssvm", "rbf"),
                                              ("svm", "linear")])
def test_search_on_dask_equals_local(cluster, data, algorithm, kernel):
    X, y = data
    local = cross_validate_grid(algorithm, X, y, kernel=kernel, grid="quick", cv=3, n_jobs=1)
    seen = []
    with dask_cluster(cluster.scheduler_address) as client:
        assert dask_client() is client
        remote = cross_validate_grid(algorithm, X, y, kernel=kernel, grid="quick", cv=3,
                                     callback=lambda d, t: seen.append((d, t)))
    assert dask_client() is None
    assert _table(remote) == _table(local)
    assert remote.best_params == local.best_params
    total = 3 * len(local.table)
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_experiment_on_dask_equals_local(cluster, data):
    X, y = data
    args = {"algorithms": ["msvmav", "svm", "lssvm"], "splits": 3, "cv": 3, "grid": "quick"}
    local = run_experiment(X, y, n_jobs=1, **args)
    seen = []
    with dask_cluster(cluster.scheduler_address):
        remote = run_experiment(X, y, callback=lambda d, t: seen.append(d), **args)
    assert _experiment(remote) == _experiment(local)
    total = 3 * sum(n_cells(a, X.shape[1], grid="quick", cv=3) + 1 for a in args["algorithms"])
    assert seen[-1] == total and seen == sorted(seen)


class StopError(Exception):
    pass


def test_cancel_mid_search_cancels_the_futures(cluster, slow_data):
    X, y = slow_data
    calls, stopped = [], []

    def stop(done, total):
        calls.append(done)
        if len(calls) == 2:
            stopped.append(time.monotonic())
            raise StopError

    with dask_cluster(cluster.scheduler_address) as client:
        with pytest.raises(StopError):
            cross_validate_grid("msvmav", X, y, grid="paper", cv=5, callback=stop)
        assert calls[-1] < 5 * 121  # stopped part way
        with suppress(AssertionError):  # (the assertions below say what is left)
            wait_until(lambda: not _scheduler_tasks(client), timeout=30, interval=0.05)
        # the scheduler forgets every outstanding task within a couple of seconds of the stop
        assert _scheduler_tasks(client) == 0
        assert time.monotonic() - stopped[0] < 3


def test_stopping_drops_queued_tasks_and_lets_running_ones_finish(cluster, tmp_path):
    """What ``run_tasks``'s docstring says of Dask: closing the generator cancels the queued
    tasks, but a task already running on a worker is not interrupted: it runs to its end
    (each runs until the test releases it)."""
    name = f"release-{tmp_path.name}"

    def task(shared, i, tick):  # nested: cloudpickle sends it to the workers by value
        (shared / f"started-{i}").touch()
        distributed.Event(name).wait(60)
        (shared / f"done-{i}").touch()
        return i

    def marked(prefix: str) -> set[int]:
        return {int(f.name.split("-")[1]) for f in tmp_path.glob(f"{prefix}-*")}

    with dask_cluster(cluster.scheduler_address) as client:
        n = 8 * sum(client.nthreads().values())
        gen = run_tasks(task, tmp_path, list(range(n)), n_jobs=1)
        for item in gen:
            assert item is None  # no task ends before the close
            if marked("started"):
                break
        gen.close()
        assert not marked("done")  # closed while the started ones run
        distributed.Event(name, client=client).set()  # the running ones go on to their end
        # Once neither the scheduler nor any worker holds a task (a running one is held, as
        # cancelled, until it ends), none can start any more: the marks are final.
        wait_until(lambda: not _cluster_tasks(client), timeout=30, interval=0.05)
        started = marked("started")
        assert marked("done") == started  # every task that was running finished
        assert 1 <= len(started) < n  # the queued ones were dropped
        assert _scheduler_tasks(client) == 0


def test_worker_killed_mid_search_gives_the_same_result(cluster, slow_data):
    X, y = slow_data
    X, y = X[:1500], y[:1500]
    grid = {"alpha": [0.1, 1.0, 10.0], "beta": [0.0, 1.0, 4.0, 8.0]}
    local = cross_validate_grid("msvmav", X, y, grid=grid, cv=4, n_jobs=1)
    with dask_cluster(cluster.scheduler_address) as client:
        pids = client.run(os.getpid)
        victim = sorted(pids)[0]
        killed = []

        def kill_once(done, total):
            busy = client.processing()
            if not killed and busy.get(victim):  # it is running a task of this search
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)

        remote = cross_validate_grid("msvmav", X, y, grid=grid, cv=4, callback=kill_once)
        assert killed, "the worker was never seen busy"
        assert _table(remote) == _table(local)
        cluster.wait_for_workers(2, timeout=60)  # the nanny starts a new worker


def test_unreachable_scheduler_fails_clearly():
    t0 = time.monotonic()
    with pytest.raises(SchedulerUnreachableError, match=r"tcp://127\.0\.0\.1:9 cannot be "
                                                        r"reached"), \
            dask_cluster("tcp://127.0.0.1:9", timeout=1):
        pass
    assert time.monotonic() - t0 < 10
    assert dask_client() is None


def test_no_address_is_local():
    with dask_cluster(None) as client:
        assert client is None and dask_client() is None


def test_a_cluster_without_workers_fails_clearly(data, monkeypatch):
    import solver.parallel

    monkeypatch.setattr(solver.parallel, "CONNECT_TIMEOUT", 1.0)
    X, y = data
    with distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as empty, \
            dask_cluster(empty.scheduler_address), \
            pytest.raises(SchedulerUnreachableError, match="has no workers"):
        cross_validate_grid("svm", X, y, grid="quick", cv=2)
