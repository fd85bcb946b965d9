"""The service's workers with MSVMAV_DASK_SCHEDULER set: a search (POST /train) and an
experiment run their cells on a real Dask cluster (distributed.LocalCluster, worker processes on
127.0.0.1) and give what a local run gives; cancel reaches the cluster; an unreachable scheduler
fails the job with a clear error."""

from __future__ import annotations

import time

import pytest

from tests.app.support import (
    blobs,
    job_finished,
    run_jobs,
    running_job,
    start_worker_process,
    stop_workers,
    submit,
    to_csv,
    upload,
    wait_for,
)

distributed = pytest.importorskip("distributed")

GRID = {"alpha": [1, 16], "beta": [0.25, 1, 4]}
EXPERIMENT = {
    "algorithms": ["msvmav", "svm", "lssvm"],
    "splits": 3,
    "cv": 3,
    "grid": {"msvmav": {"alpha": [1, 16], "beta": [0.25, 1]}, "svm": {"C": [0.25, 4]}},
    "params": {"msvmav": {"max_iter": 30}},
}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as c:
        yield c


def _search(client, job) -> dict:
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["status"] == "succeeded", body
    search = client.get(f"/models/{body['model_id']}").json()["search"]
    for row in search["table"]:
        row.pop("fit_seconds")
    search.pop("seconds")
    return search


def test_search_job_on_dask_equals_local(client, worker, cluster):
    ds = upload(client, to_csv(*blobs(n=150, seed=3, shift=1.0)))
    body = {"search": {"grid": GRID, "cv": 3, "seed": 2}, "max_iter": 40}
    local = submit(client, ds["id"], **body)
    assert run_jobs(worker) == ["succeeded"]
    worker.settings.dask_scheduler = cluster.scheduler_address
    remote = submit(client, ds["id"], **body)
    with distributed.Client(cluster.scheduler_address) as observer:
        before = observer.run_on_scheduler(
            lambda dask_scheduler: len(dask_scheduler.transition_log))
        assert run_jobs(worker) == ["succeeded"]
        after = observer.run_on_scheduler(
            lambda dask_scheduler: len(dask_scheduler.transition_log))
    assert after > before  # the cells went through the scheduler
    assert _search(client, remote) == _search(client, local)


def test_experiment_job_on_dask_equals_local(client, worker, cluster):
    ds = upload(client, to_csv(*blobs(n=60, seed=2, shift=1.0)), filename="hard.csv")

    def run() -> dict:
        r = client.post("/experiments", json={"dataset_ids": [ds["id"]], **EXPERIMENT})
        assert r.status_code == 202, r.text
        assert run_jobs(worker) == ["succeeded"]
        out = client.get(f"/experiments/{r.json()['id']}").json()
        for res in out["results"]:
            res["result"].pop("seconds")
            for rec in res["result"]["algorithms"].values():
                rec.pop("seconds")
        return out["results"]

    local = run()
    worker.settings.dask_scheduler = cluster.scheduler_address
    assert run() == local


def test_cancel_a_search_running_on_dask(client, worker, engine, cluster):
    X, y = blobs(n=3000, d=40, seed=1, shift=0.3)
    ds = upload(client, to_csv(X, y))
    worker.settings.dask_scheduler = cluster.scheduler_address
    submit(client, ds["id"], search={"grid": "paper", "cv": 5}, max_iter=200, tol=0)
    with distributed.Client(cluster.scheduler_address) as observer:

        def tasks() -> int:
            return observer.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))

        with running_job(engine, worker) as (job_id, statuses):
            wait_for(lambda: tasks() > 0)
            assert client.post(f"/jobs/{job_id}/cancel").status_code == 202
            asked = time.monotonic()
        assert statuses == ["cancelled"]
        assert time.monotonic() - asked < 5
        wait_for(lambda: tasks() == 0, timeout=3)  # the outstanding futures are cancelled
    assert client.get(f"/jobs/{job_id}").json()["status"] == "cancelled"


def test_unreachable_scheduler_fails_the_job_clearly(client, worker, monkeypatch):
    import solver.parallel

    monkeypatch.setattr(solver.parallel, "CONNECT_TIMEOUT", 1.0)
    ds = upload(client, to_csv(*blobs(n=40)))
    worker.settings.dask_scheduler = "tcp://127.0.0.1:9"
    job = submit(client, ds["id"], search={"grid": {"alpha": [1, 2]}, "cv": 2})
    assert run_jobs(worker) == ["failed"]
    body = client.get(f"/jobs/{job['id']}").json()
    assert "Dask scheduler tcp://127.0.0.1:9 cannot be reached" in body["error"]
    assert "Traceback" not in body["error"]
    assert body["model_id"] is None


def test_worker_command_takes_the_scheduler_as_an_option(client, engine, database_url, cluster,
                                                         tmp_path):
    """`msvmav worker --dask-scheduler ADDRESS` (a real process, no MSVMAV_DASK_SCHEDULER in
    its environment) sends a search's cells to that scheduler."""
    ds = upload(client, to_csv(*blobs(n=120, seed=5, shift=1.0)))
    job = submit(client, ds["id"], search={"grid": GRID, "cv": 3, "seed": 1}, max_iter=30)
    with distributed.Client(cluster.scheduler_address) as observer:
        before = observer.run_on_scheduler(
            lambda dask_scheduler: len(dask_scheduler.transition_log))
        proc = start_worker_process(
            database_url, tmp_path, "--dask-scheduler", cluster.scheduler_address,
            env={"MSVMAV_WORKER_POLL_INTERVAL": "0.05"}, deployed_defaults=True,
        )
        try:
            body = job_finished(client, job["id"])
        finally:
            (output,) = stop_workers([proc])
        after = observer.run_on_scheduler(
            lambda dask_scheduler: len(dask_scheduler.transition_log))
    assert body["status"] == "succeeded", (body, output)
    assert after > before, output  # the cells went through the scheduler
