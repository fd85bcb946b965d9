"""A Dask worker process SIGKILLed while a pass of a cluster fit is queued on it (a real
distributed.LocalCluster, two worker processes): the pass is cancelled and submitted again,
the model is the local one, and the scheduler keeps no task of the fit afterwards."""

from __future__ import annotations

import os
import signal
from contextlib import suppress

import numpy as np
import pytest
from sklearn.datasets import make_moons

from solver import MSVMAv
from solver.distributed import fit_on_cluster
from tests.wait_support import wait_until

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

pytestmark = pytest.mark.process

ROWS, CHUNK = 1200, 300


@pytest.fixture
def client():
    """A cluster of its own for each test: the one a test kills a worker of is not waited
    for (its nanny's new worker takes minutes on a loaded machine)."""
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _moons(seed: int = 0):
    X, y = make_moons(ROWS, noise=0.25, random_state=seed)
    return (X - X.min(0)) / (X.max(0) - X.min(0)), y


def _dask(X, y):
    return da.from_array(X, chunks=(CHUNK, X.shape[1])), da.from_array(y, chunks=CHUNK)


def _same(a: MSVMAv, b: MSVMAv, X) -> None:
    da_, db = a.decision_function(X), b.decision_function(X)
    assert np.max(np.abs(da_ - db)) <= 1e-9 * np.max(np.abs(da_))
    assert a.n_iter_ == b.n_iter_
    assert [r["active"] for r in a.history_] == [r["active"] for r in b.history_]


def _outstanding_tasks(dask_scheduler) -> list[tuple]:
    """(key, state, the clients wanting it, its first dependents, the workers it is
    restricted to) of the tasks the scheduler still means to run or holds, but the tests'
    own blockers ("hold-...")."""
    return [(str(key), ts.state, sorted(c.client_key for c in ts.who_wants or ()),
             sorted(str(d.key) for d in ts.dependents)[:3],
             sorted(ts.worker_restrictions or ()))
            for key, ts in dask_scheduler.tasks.items()
            if ts.state in ("processing", "queued", "waiting", "no-worker", "memory")
            and not str(key).startswith("hold")]


def _settled(client, timeout: float = 30.0) -> list[tuple]:
    """The scheduler's outstanding tasks once there are none, or after ``timeout`` (a
    release travels on the client's batched stream: the scheduler may not have read it)."""
    with suppress(AssertionError):  # (the caller asserts on what is left)
        wait_until(lambda: not client.run_on_scheduler(_outstanding_tasks), timeout=timeout,
                   interval=0.1)
    return client.run_on_scheduler(_outstanding_tasks)


def _hold(name: str) -> None:
    distributed.Event(name).wait(60)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "rbf-rows", "rbf-nothing"])
def test_a_worker_sigkilled_mid_pass_retries_the_pass_and_leaves_no_task(client, kernel):
    """At iteration 2's record each worker's one thread is taken by a task waiting on an
    event, so the next pass's tasks are queued on the workers holding their blocks; at that
    pass's first progress record one worker process is SIGKILLed and the event set: the
    pass is cancelled and submitted again (its blocks recomputed from their graph on the
    worker left), the model is the local one, and the scheduler keeps no task of the fit.
    "rbf-rows": the features computed on every pass from the kept raw blocks, the raw blocks
    recomputed on the worker left; "rbf-nothing": nothing kept, every pass reading each block
    from its graph (the scheduler runs the dead worker's tasks on the other)."""
    X, y = _moons(seed=5)
    name = kernel
    kernel, _, keep = kernel.partition("-")
    extra = {"keep": keep} if keep else {}
    params = {"kernel": kernel, "max_iter": 8, "random_state": 0, "gamma": 5.0,
              "kernel_tol": 1e-3}
    local = MSVMAv(**params).fit(X, y)
    assert _settled(client) == []
    pids = client.run(os.getpid)
    victim = next(iter(pids))
    release = distributed.Event(f"hold-release-{name}", client=client)
    state: dict = {"holds": []}

    def kill_mid_pass(info):
        if info.get("stage") is None and info["iteration"] == 2 and not state["holds"]:
            state["holds"] = [client.submit(_hold, f"hold-release-{name}",
                                            key=f"hold-{name}-{w}", workers=[w])
                              for w in client.scheduler_info()["workers"]]
        elif info.get("stage") == "cluster_pass" and state["holds"] and "killed" not in state:
            state["killed"] = client.run_on_scheduler(_outstanding_tasks)
            os.kill(pids[victim], signal.SIGKILL)
            release.set()

    remote = fit_on_cluster(MSVMAv(**params), *_dask(X, y), client=client,
                            callback=kill_mid_pass, **extra)
    assert state["killed"], "the pass had tasks queued when the worker was killed"
    _same(local, remote, X)
    if extra:
        assert remote.fit_info_["cluster"]["keep"] == keep
    del state["holds"]
    assert _settled(client) == []
