"""Datasets by reference on a real Dask cluster (distributed.LocalCluster: 2 worker processes on
127.0.0.1): the first pass runs there and gives what a local one gives; a train job fits a
linear MSVMAv there (solver.distributed.fit_on_cluster) equal to the local fit of the same rows
uploaded as CSV within 1e-9; cancel stops the cluster's tasks; batch scoring writes each
partition once; what the cluster fit cannot do is a 422 at /train."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.app.reference_support import (  # noqa: F401  (fixtures: the app's data root)
    frame,
    root_fixture,
    settings_fixture,
    write_parts,
)
from tests.app.support import assert_problem, run_jobs, running_job, submit, upload, wait_for

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=":0") as c:
        yield c



def _register(client, uri: Path, **body) -> dict:
    r = client.post("/datasets/references", json={"uri": str(uri), "label": "label", **body})
    assert r.status_code == 201, r.text
    return r.json()


def _tasks_seen(address: str) -> int:
    with distributed.Client(address) as observer:
        return observer.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.transition_counter)


def test_the_first_pass_on_the_cluster_equals_the_local_one(client, settings, cluster,
                                                             root: Path):
    write_parts(frame(), root / "clicks", parts=4)
    local = _register(client, root / "clicks", drop=["id"])
    settings.dask_scheduler = cluster.scheduler_address
    before = _tasks_seen(cluster.scheduler_address)
    remote = _register(client, root / "clicks", drop=["id"])
    assert _tasks_seen(cluster.scheduler_address) > before  # the passes went through it
    for key in ("encoding", "classes", "class_counts", "n_rows", "feature_names", "reference"):
        assert remote[key] == local[key], key
    # an error raised in a task on the cluster is the same 422 as here
    r = client.post("/datasets/references", json={"uri": str(root / "clicks"), "label": "nope"})
    assert_problem(r, 422, "label")


def test_a_fit_on_the_cluster_equals_the_local_fit_of_the_same_rows(client, worker, settings,
                                                                     cluster, root: Path):
    df = frame(n=400, seed=4)
    write_parts(df, root / "clicks", parts=4)
    up = upload(client, df.to_csv(index=False, float_format="%.17g").encode(), label="label",
                drop="id")
    # every row trains (a cluster fit keeps no hold-out; the local one is told so)
    params = {"max_iter": 30, "calibration": "none", "test_fraction": None}
    local = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"]
    settings.dask_scheduler = cluster.scheduler_address
    ref = _register(client, root / "clicks", drop=["id"])
    before = _tasks_seen(cluster.scheduler_address)
    remote = submit(client, ref["id"], **params)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{remote['id']}").json()
    assert _tasks_seen(cluster.scheduler_address) > before
    ids = [client.get(f"/jobs/{j['id']}").json()["model_id"] for j in (local, remote)]
    m_local, m_remote = (client.get(f"/models/{i}").json() for i in ids)
    assert m_remote["n_train"] == m_local["n_train"] == 400
    rows = df.drop(columns=["label"]).to_dict("records")
    a, b = ([p["decision_value"] for p in client.post(
        "/predict", json={"model_id": i, "instances": rows}).json()["predictions"]] for i in ids)
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9 * np.max(np.abs(a)))
    assert m_remote["train_accuracy"] == pytest.approx(m_local["train_accuracy"], abs=1e-12)
    for key in ("data_min", "data_max"):
        assert m_remote["scaling_ranges"][key] == pytest.approx(
            m_local["scaling_ranges"][key], rel=1e-12)
    for key in ("mean", "variance"):
        assert m_remote["train_margins"][key] == pytest.approx(
            m_local["train_margins"][key], rel=1e-9)


def test_what_the_cluster_fit_cannot_do_is_refused_at_train(client, settings, cluster,
                                                            root: Path):
    write_parts(frame(), root / "clicks")
    settings.dask_scheduler = cluster.scheduler_address
    ref = _register(client, root / "clicks", drop=["id"])
    for body, field in (({"algorithm": "svm"}, "algorithm"),
                        ({"kernel": "rbf", "approximation": "nystroem"}, "approximation"),
                        ({"search": {"grid": "quick"}}, "search"),
                        ({"test_fraction": 0.2}, "test_fraction")):
        r = client.post("/train", json={"dataset_id": ref["id"], **body})
        problem = assert_problem(r, 422, field)
        assert "Dask cluster" in problem["detail"], problem


def test_an_rbf_fit_on_the_cluster_equals_the_local_low_rank_fit(client, worker, settings,
                                                                 cluster, root: Path):
    """Every row is the landmarks' sample: the cluster's pivots are the local fit's."""
    df = frame(n=400, seed=5)
    write_parts(df, root / "clicks", parts=3)
    up = upload(client, df.to_csv(index=False, float_format="%.17g").encode(), label="label",
                drop="id")
    params = {"kernel": "rbf", "gamma": 2.0, "approximation": "low_rank", "kernel_tol": 1e-2,
              "max_iter": 20, "calibration": "none", "test_fraction": None}
    local = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"]
    settings.dask_scheduler = cluster.scheduler_address
    ref = _register(client, root / "clicks", drop=["id"])
    remote = submit(client, ref["id"], **params)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{remote['id']}").json()
    ids = [client.get(f"/jobs/{j['id']}").json()["model_id"] for j in (local, remote)]
    m_local, m_remote = (client.get(f"/models/{i}").json() for i in ids)
    rows = df.drop(columns=["label"]).to_dict("records")
    a, b = ([p["decision_value"] for p in client.post(
        "/predict", json={"model_id": i, "instances": rows}).json()["predictions"]] for i in ids)
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9 * np.max(np.abs(a)))
    t_local, t_remote = m_local["train_margins"], m_remote["train_margins"]
    for key in ("mean", "semivariance", "min", "max", "rademacher_bound"):
        assert t_remote[key] == pytest.approx(t_local[key], rel=1e-9), key
    assert t_remote["histogram"]["counts"] == t_local["histogram"]["counts"]
    assert 0 < t_remote["quantile_rank_error"] < 0.01
    # the kernel model scores the dataset on the cluster, one Parquet part per partition
    # beside the files, the decisions /predict gives
    before = _tasks_seen(cluster.scheduler_address)
    batch = client.post("/batch-predictions", data={"dataset_id": ref["id"],
                                                    "model_id": ids[1], "output": "parquet"})
    assert run_jobs(worker) == ["succeeded"]
    assert _tasks_seen(cluster.scheduler_address) > before
    out = Path(client.get(f"/jobs/{batch.json()['id']}").json()["result"]["output_uri"])
    assert out.parent == root / "clicks"
    assert sorted(p.name for p in out.iterdir()) == [f"part-{k:05d}.parquet" for k in range(3)]
    scored = pd.concat([pd.read_parquet(p) for p in sorted(out.iterdir())])
    assert scored["row"].tolist() == list(range(400))
    np.testing.assert_allclose(scored["decision_value"], b, rtol=1e-12, atol=1e-12)


def test_a_rank_the_workers_memory_cannot_hold_is_a_422_at_train(client, settings,
                                                                 root: Path):
    """Two worker processes of 600 MiB and 2 partitions of 10,000 rows: a rank-1000 map of
    one partition needs 8 x 10,000 x (4 d + 5,000) bytes (400 MB) even with nothing kept,
    more than 0.85 x (0.6 of the limit - the worker's fixed cost); the largest rank the
    answer names is accepted, one more is not (each measured by the workers again)."""
    import re

    write_parts(frame(n=20_000, seed=6), root / "big", parts=2)
    ref = _register(client, root / "big", drop=["id"])
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  memory_limit="600MiB", host="127.0.0.1",
                                  dashboard_address=":0") as small:
        settings.dask_scheduler = small.scheduler_address
        body = {"dataset_id": ref["id"], "kernel": "rbf", "approximation": "low_rank"}
        r = client.post("/train", json={**body, "n_components": 1000})
        problem = assert_problem(r, 422, "n_components")
        found = re.search(r"rank 1000 needs (\d+) MiB on a worker even reading every block "
                          r"again on every pass \(blocks of up to 10000 rows of "
                          rf"{ref['n_features']} features\), more than a worker's budget of "
                          r"(\d+) MiB.*the largest rank that fits is (\d+);",
                          problem["detail"])
        assert found, problem
        need, budget, fits = (int(v) for v in found.groups())
        assert need == round(8 * 10_000 * (4 * ref["n_features"] + 5 * 1000) / 2**20)
        assert 0 < budget < 0.6 * 600
        # (the workers' fixed cost moves by a few MiB between readings: 50 ranks are 20 MB)
        assert client.post("/train", json={**body, "n_components": fits - 50}).status_code \
            == 202
        assert_problem(client.post("/train", json={**body, "n_components": fits + 50}), 422,
                       "n_components")


def test_a_linear_partition_the_workers_memory_cannot_hold_is_a_422_at_train(
        client, settings, root: Path):
    """A linear fit's rows are planned like a kernel fit's rank (issue 46): one partition of
    400,000 rows of 5 features needs 4 x 8 x 6 x 400,000 bytes (73 MiB) on a worker's thread
    even read again on every pass, more than a 450 MiB worker's budget of 0.85 x (0.6 of its
    limit - its fixed cost, ~220 MiB): a 422 naming dataset_id at /train (it was queued, and
    the job failed on the cluster with the library's message)."""
    (root / "one").mkdir()
    frame(n=400_000, seed=7).to_parquet(root / "one" / "part-0.parquet", index=False)
    ref = _register(client, root / "one", drop=["id"])
    with distributed.LocalCluster(processes=True, n_workers=1, threads_per_worker=1,
                                  memory_limit="450MiB", host="127.0.0.1",
                                  dashboard_address=":0") as small:
        settings.dask_scheduler = small.scheduler_address
        r = client.post("/train", json={"dataset_id": ref["id"], "kernel": "linear",
                                        "calibration": "none"})
        problem = assert_problem(r, 422, "dataset_id")
        assert (f"even reading every block again on every pass (blocks of up to 400000 rows "
                f"of {ref['n_features']} features)") in problem["detail"], problem
        assert "smaller partitions, or workers with more memory" in problem["detail"]


def test_cancel_stops_the_fit_and_its_tasks_on_the_cluster(client, worker, engine, settings,
                                                            cluster, root: Path):
    df = frame(n=6000, seed=1)
    write_parts(df, root / "big", parts=6)
    settings.dask_scheduler = cluster.scheduler_address
    ref = _register(client, root / "big", drop=["id"])
    submit(client, ref["id"], max_iter=100_000, tol=0, calibration="none")
    with distributed.Client(cluster.scheduler_address) as observer:

        def tasks() -> set[str]:
            return set(observer.run_on_scheduler(
                lambda dask_scheduler: [str(key) for key in dask_scheduler.tasks]))

        # keys an earlier test's futures may still hold (released when the garbage collector
        # frees them): this test asks only that none of the fit's own tasks outlive the cancel
        earlier = tasks()
        with running_job(engine, worker) as (job_id, statuses):
            wait_for(lambda: "iteration" in client.get(f"/jobs/{job_id}").json()["message"],
                     timeout=60)
            assert client.post(f"/jobs/{job_id}/cancel").status_code == 202
            asked = time.monotonic()
        assert statuses == ["cancelled"]
        assert time.monotonic() - asked < 10
        # none of the fit's tasks left running or held there (the scheduler forgets released
        # keys asynchronously: slower on a loaded machine)
        wait_for(lambda: not tasks() - earlier, timeout=30)
    assert client.get(f"/jobs/{job_id}").json()["status"] == "cancelled"


def test_batch_on_the_cluster_writes_each_partition_once(client, worker, settings, cluster,
                                                         root: Path):
    df = frame(n=300, seed=2)
    write_parts(df, root / "clicks", parts=5)
    ref = _register(client, root / "clicks")
    job = submit(client, ref["id"], max_iter=30)  # fitted here (no scheduler yet)
    assert run_jobs(worker) == ["succeeded"]
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    local = client.post("/batch-predictions", data={"dataset_id": ref["id"],
                                                    "model_id": model_id, "output": "parquet"})
    assert run_jobs(worker) == ["succeeded"]
    settings.dask_scheduler = cluster.scheduler_address
    before = _tasks_seen(cluster.scheduler_address)
    remote = client.post("/batch-predictions", data={"dataset_id": ref["id"],
                                                     "model_id": model_id, "output": "parquet"})
    assert run_jobs(worker) == ["succeeded"]
    assert _tasks_seen(cluster.scheduler_address) > before
    outs = [Path(client.get(f"/jobs/{r.json()['id']}").json()["result"]["output_uri"])
            for r in (local, remote)]
    tables = []
    for out in outs:
        assert sorted(p.name for p in out.iterdir()) == [f"part-{k:05d}.parquet"
                                                         for k in range(5)]
        tables.append(pd.concat([pd.read_parquet(p) for p in sorted(out.iterdir())]))
    assert tables[1]["row"].tolist() == list(range(300))
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_an_uploaded_dataset_over_the_size_threshold_is_fitted_on_the_cluster(
        client, worker, settings, cluster):
    df = frame(n=300, seed=6).drop(columns=["id"])
    up = upload(client, df.to_csv(index=False).encode(), label="label")
    params = {"max_iter": 40, "calibration": "none", "test_fraction": None}
    local = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"]
    settings.dask_scheduler = cluster.scheduler_address
    settings.dask_fit_min_bytes = 1000  # 300 rows × 5 features × 8 bytes is more
    before = _tasks_seen(cluster.scheduler_address)
    remote = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{remote['id']}").json()
    assert _tasks_seen(cluster.scheduler_address) > before
    ids = [client.get(f"/jobs/{j['id']}").json()["model_id"] for j in (local, remote)]
    rows = df.drop(columns=["label"]).to_dict("records")
    a, b = ([p["decision_value"] for p in client.post(
        "/predict", json={"model_id": i, "instances": rows}).json()["predictions"]] for i in ids)
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9 * np.max(np.abs(a)))


def test_a_dask_worker_killed_mid_fit_still_gives_the_same_model(client, worker, engine,
                                                                  settings, cluster, root: Path):
    """The dataset's blocks are a reader graph: the scheduler recomputes the lost worker's
    partitions from their Parquet files and the job's model is the local fit's."""
    import os
    import signal

    df = frame(n=400, seed=7)
    write_parts(df, root / "clicks", parts=4)
    up = upload(client, df.to_csv(index=False, float_format="%.17g").encode(), label="label",
                drop="id")
    params = {"max_iter": 150, "tol": 0, "calibration": "none", "test_fraction": None}
    local = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"]
    settings.dask_scheduler = cluster.scheduler_address
    ref = _register(client, root / "clicks", drop=["id"])
    remote = submit(client, ref["id"], **params)
    with distributed.Client(cluster.scheduler_address) as observer:
        pids = observer.run(os.getpid)
        victim = next(iter(pids))
        # 240 s: the fit recomputes the lost worker's partitions while its nanny restarts it;
        # alone it takes ~20 s, beside the full suite's load it once took over 60 s
        with running_job(engine, worker, timeout=240) as (job_id, statuses):
            wait_for(lambda: "iteration" in client.get(f"/jobs/{job_id}").json()["message"],
                     timeout=60)
            os.kill(pids[victim], signal.SIGKILL)
            killed_at = client.get(f"/jobs/{job_id}").json()
        assert statuses == ["succeeded"], client.get(f"/jobs/{job_id}").json()
        assert killed_at["status"] == "running"
        removed = observer.run_on_scheduler(
            lambda dask_scheduler: [e for e in dask_scheduler.get_events("all")
                                    if isinstance(e[1], dict)
                                    and e[1].get("action") == "remove-worker"
                                    and e[1].get("worker") == victim])
        assert removed
        observer.wait_for_workers(2, timeout=60)
    ids = [client.get(f"/jobs/{j['id']}").json()["model_id"] for j in (local, remote)]
    rows = df.drop(columns=["label"]).to_dict("records")
    a, b = ([p["decision_value"] for p in client.post(
        "/predict", json={"model_id": i, "instances": rows}).json()["predictions"]] for i in ids)
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9 * np.max(np.abs(a)))


def test_a_sparse_upload_over_the_size_threshold_is_fitted_on_the_cluster(
        client, worker, settings, cluster):
    """An svmlight upload is stored as CSR: its row blocks reach the cluster fit and the
    summary's row norms as CSR blocks, and the model equals the local fit's."""
    rng = np.random.default_rng(7)
    lines = []
    for _ in range(300):
        cols = sorted(rng.choice(40, size=5, replace=False) + 1)
        vals = rng.uniform(0.1, 1.0, size=5)
        label = 1 if vals[0] + (cols[0] < 10) > 1.0 else -1
        lines.append(f"{label} " + " ".join(f"{c}:{v:.4f}" for c, v in zip(cols, vals,
                                                                        strict=True)))
    up = upload(client, ("\n".join(lines) + "\n").encode(), filename="sparse.svm")
    assert up["sparse"], up
    params = {"max_iter": 40, "calibration": "none", "scaling": "none", "test_fraction": None}
    local = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"]
    settings.dask_scheduler = cluster.scheduler_address
    settings.dask_fit_min_bytes = 1000
    remote = submit(client, up["id"], **params)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{remote['id']}").json()
    ids = [client.get(f"/jobs/{j['id']}").json()["model_id"] for j in (local, remote)]
    # the training margins' statistics and Theorem 1's terms (from the rows' norms): every
    # row's decision value and norm, on the cluster against the local fit
    a, b = (client.get(f"/models/{i}").json()["train_margins"] for i in ids)
    keys = [k for k, v in a.items() if isinstance(v, float)]
    assert {"mean", "semivariance", "min", "max"} <= set(keys), a
    np.testing.assert_allclose([b[k] for k in keys], [a[k] for k in keys], rtol=1e-9,
                               atol=1e-12)


def test_a_cluster_model_is_calibrated_by_default_and_has_probabilities(client, worker,
                                                                       settings, cluster,
                                                                       root: Path):
    """The default calibration ("sigmoid") is fitted on folds of the dataset's partitions:
    /predict gives each row's probabilities, its label the most probable class; a dataset of
    one partition cannot be calibrated there (422 naming calibration)."""
    df = frame(n=400, seed=7)
    write_parts(df, root / "clicks", parts=4)
    write_parts(df, root / "one", parts=1)
    settings.dask_scheduler = cluster.scheduler_address
    ref = _register(client, root / "clicks", drop=["id"])
    job = submit(client, ref["id"], max_iter=20, test_fraction=None)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    rows = df.drop(columns=["label"]).to_dict("records")
    out = client.post("/predict", json={"model_id": model_id, "instances": rows}).json()
    for p in out["predictions"]:
        probs = p["probabilities"]
        assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)
        assert p["label"] == max(probs, key=probs.get)
    one = _register(client, root / "one", drop=["id"])
    r = client.post("/train", json={"dataset_id": one["id"], "calibration": "sigmoid"})
    assert "partitions" in assert_problem(r, 422, "calibration")["detail"]
    # uncalibrated by default there, as before
    assert client.post("/train", json={"dataset_id": one["id"]}).status_code == 202
