"""/train refuses, before queuing, a fit whose predicted peak memory exceeds MSVMAV_MAX_FIT_BYTES
(issue 15 point 8), and wide data sets train instead of failing in the worker (issue 20):
a 30 x 12,000 CSV took 3.7 GB, and 1,000 x 100,000 sparse rows failed with a 74.5 GiB
MemoryError."""

from __future__ import annotations

import io

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings, half_of_physical_memory
from app.main import create_app
from solver.fit_cost import (
    EXACT_STEP,
    GRAM,
    INVERSE,
    KERNEL_STEP_OVERHEAD,
    exact_kernel_seconds,
)
from solver.memory import estimate_fit
from tests.app.support import assert_problem, run_jobs, submit, to_csv, upload


def wide_csv(n: int = 30, d: int = 12_000) -> bytes:
    rng = np.random.default_rng(0)
    X = rng.random((n, d))
    y = np.where(X[:, 0] + X[:, 1] > 1.0, "a", "b")
    y[:2] = ["a", "b"]
    return to_csv(X, y)


def wide_svmlight(n: int = 1000, d: int = 100_000, k: int = 50) -> bytes:
    rng = np.random.default_rng(1)
    out = io.StringIO()
    for i in range(n):
        cols = np.sort(rng.choice(d, size=k, replace=False))
        label = 1 if (cols < d // 2).sum() > k // 2 else -1
        feats = " ".join(f"{c + 1}:{v:.4f}" for c, v in zip(cols, rng.random(k), strict=True))
        out.write(f"{label if i > 1 else (1, -1)[i]} {feats}\n")
    return out.getvalue().encode()


def limited(settings: Settings, max_fit_bytes: int) -> TestClient:
    return TestClient(create_app(settings.model_copy(update={"max_fit_bytes": max_fit_bytes})))


# The fits' own estimates: /train's default calibration adds its folds (see the last test).
UNCALIBRATED = {"calibration": "none"}


def test_default_limit_is_half_the_physical_memory(settings):
    assert settings.max_fit_bytes == half_of_physical_memory() > 0


def test_a_30_by_12000_csv_trains_at_the_default_limit(client, worker):
    ds = upload(client, wide_csv())
    job = submit(client, ds["id"], max_iter=20)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()


def test_a_small_limit_refuses_the_fit_with_a_clear_422_before_queuing(settings, engine):
    with limited(settings, 1_000_000) as c:
        ds = upload(c, wide_csv())
        r = c.post("/train", json={"dataset_id": ds["id"], "max_iter": 20, **UNCALIBRATED})
        body = assert_problem(r, 422, "dataset_id")
        assert body["estimate_bytes"] > body["limit_bytes"] == 1_000_000
        assert body["path"] == "woodbury"
        assert "MSVMAV_MAX_FIT_BYTES" in body["detail"] and "30 rows x 12000" in body["detail"]
        assert "use linear_solver='cg'" in body["detail"]  # the advice
        assert c.get("/jobs").json()["items"] == []
        # within the limit the same request is accepted
        need = estimate_fit("msvmav", 30, 12_000, None, {}).peak_bytes
    with limited(settings, need + 1) as c:
        body = {"dataset_id": ds["id"], "max_iter": 20, **UNCALIBRATED}
        assert c.post("/train", json=body).status_code == 202


def test_the_hold_out_split_and_the_largest_search_configuration_count(settings, engine):
    rng = np.random.default_rng(2)
    X = rng.random((400, 5))
    content = to_csv(X, np.where(X[:, 0] > 0.5, "p", "n"))
    fixed = {"kernel": "rbf", "approximation": "nystroem", "max_iter": 5}
    small = estimate_fit("msvmav", 300, 5, None, {**fixed, "n_components": 10})
    large = estimate_fit("msvmav", 300, 5, None, {**fixed, "n_components": 300})
    assert small.peak_bytes < large.peak_bytes
    with limited(settings, (small.peak_bytes + large.peak_bytes) // 2) as c:
        ds = upload(c, content)
        body = {"dataset_id": ds["id"], "kernel": "rbf", "test_fraction": 0.25, **UNCALIBRATED,
                "params": {"approximation": "nystroem", "max_iter": 5}}
        ok = {**body, "search": {"grid": {"n_components": [10, 20]}, "cv": 3}}
        assert c.post("/train", json=ok).status_code == 202
        bad = {**body, "search": {"grid": {"n_components": [10, 300]}, "cv": 3}}
        problem = assert_problem(c.post("/train", json=bad), 422, "dataset_id")
        assert problem["estimate_bytes"] == large.peak_bytes  # 300 training rows, not 400
        assert "300 rows" in problem["detail"]


def test_a_wide_sparse_dataset_trains_instead_of_a_worker_memory_error(client, worker):
    """1,000 x 100,000 with 50 values a row: the dense D x D system needed 74.5 GiB."""
    ds = upload(client, wide_svmlight(), filename="wide.svm", n_features="100000")
    assert ds["n_features"] == 100_000
    job = submit(client, ds["id"])
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    # asking for the dense path explicitly is refused at submission, not by the worker
    r = client.post("/train", json={"dataset_id": ds["id"],
                                    "params": {"linear_solver": "dense"}})
    body = assert_problem(r, 422, "dataset_id")
    assert body["path"] == "dense" and "GiB" in body["detail"]


@pytest.mark.parametrize("algorithm", ["lssvm", "odm"])
def test_comparators_are_admitted_by_their_own_estimate(settings, engine, algorithm):
    rng = np.random.default_rng(3)
    X = rng.random((200, 4))
    content = to_csv(X, np.where(X[:, 0] > 0.5, "p", "n"))
    need = estimate_fit(algorithm, 200, 4, None, {"kernel": "rbf"}).peak_bytes
    with limited(settings, need - 1) as c:
        ds = upload(c, content)
        r = c.post("/train", json={"dataset_id": ds["id"], "algorithm": algorithm,
                                   "kernel": "rbf", "test_fraction": None, **UNCALIBRATED})
        assert assert_problem(r, 422, "dataset_id")["estimate_bytes"] == need


def with_limits(settings: Settings, **limits) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=limits)))


def test_train_keeps_the_time_estimate_beside_the_memory_estimate(client):
    """Issue 28 point 8: /train answers with admission's estimate in the job's params: the
    memory estimate and the predicted seconds, each as solver computes it for these rows."""
    rng = np.random.default_rng(3)
    X = rng.random((400, 5))
    ds = upload(client, to_csv(X, np.where(X[:, 0] > 0.5, "p", "n")))
    job = submit(client, ds["id"], kernel="rbf", approximation="exact", max_iter=7,
                 test_fraction=0.25, **UNCALIBRATED)
    params = {"kernel": "rbf", "approximation": "exact", "max_iter": 7}
    estimate = job["params"]["estimate"]
    assert estimate["peak_bytes"] == estimate_fit("msvmav", 300, 5, None, params).peak_bytes
    assert estimate["path"] == "exact-kernel"
    assert estimate["seconds"] == round(exact_kernel_seconds(300, 5, 7), 3)
    # a search: per fold (300 training rows, 100 test rows) one Gram matrix of each and one
    # inverse for the one gamma, the iterations per configuration, then the refit on all 400
    body = {"dataset_id": ds["id"], "kernel": "rbf", "approximation": "exact",
            "max_iter": 7, **UNCALIBRATED, "search": {"grid": {"alpha": [1.0, 2.0, 4.0]}, "cv": 4},
            "test_fraction": None}
    searched = client.post("/train", json=body).json()["params"]["estimate"]
    fold = (GRAM * (300 * 300 + 300 * 100) * 5 + INVERSE * 300**3
            + 3 * (EXACT_STEP * 300 * 300 + KERNEL_STEP_OVERHEAD) * 7)
    expected = 4 * fold + exact_kernel_seconds(400, 5, 7)
    assert searched["seconds"] == pytest.approx(expected, abs=1e-3)
    # an algorithm the cost model does not cover: no seconds, the memory estimate still there
    svm = client.post("/train", json={"dataset_id": ds["id"], "algorithm": "svm"}).json()
    assert svm["params"]["estimate"]["seconds"] is None
    assert svm["params"]["estimate"]["peak_bytes"] > 0


def test_max_fit_seconds_refuses_a_fit_predicted_to_take_longer(settings, engine):
    """MSVMAV_MAX_FIT_SECONDS: an exact-kernel fit on 3,000 rows is predicted above 1 s and
    refused with a 422 naming the limit; a linear fit on the same rows is accepted; unset, no
    time limit applies."""
    rng = np.random.default_rng(4)
    X = rng.random((3000, 4))
    content = to_csv(X, np.where(X[:, 0] > 0.5, "p", "n"))
    # no hold-out: all 3,000 rows train
    exact = {"kernel": "rbf", "approximation": "exact", "test_fraction": None, **UNCALIBRATED}
    predicted = exact_kernel_seconds(3000, 4, 100)
    assert predicted > 1.0
    with with_limits(settings, max_fit_seconds=1.0) as c:
        ds = upload(c, content)
        r = c.post("/train", json={"dataset_id": ds["id"], **exact})
        body = assert_problem(r, 422, "dataset_id")
        assert body["estimate_seconds"] == round(predicted, 3) and body["limit_seconds"] == 1.0
        assert "MSVMAV_MAX_FIT_SECONDS" in body["detail"] and "3000 rows x 4" in body["detail"]
        assert c.get("/jobs").json()["items"] == []
        assert c.post("/train", json={"dataset_id": ds["id"], "search": "none",
                                      **UNCALIBRATED}).status_code == 202
    with with_limits(settings, max_fit_seconds=None) as c:
        assert c.post("/train", json={"dataset_id": ds["id"], **exact}).status_code == 202


def test_a_calibrated_fit_is_estimated_with_its_folds(client):
    """/train's default calibration (sigmoid) first fits CALIBRATION_FOLDS clones on
    (folds - 1) / folds of the training rows each: admission adds their rows' copy to the
    memory estimate and their fits to the seconds, so MSVMAV_MAX_FIT_BYTES and
    MSVMAV_MAX_FIT_SECONDS judge the job that will run."""
    from solver.calibration import CALIBRATION_FOLDS

    rng = np.random.default_rng(5)
    X = rng.random((400, 5))
    ds = upload(client, to_csv(X, np.where(X[:, 0] > 0.5, "p", "n")))
    params = {"kernel": "rbf", "approximation": "exact", "max_iter": 7}
    job = submit(client, ds["id"], test_fraction=0.25, **params)  # calibration: the default
    assert job["params"]["calibration"] == "sigmoid"
    estimate = job["params"]["estimate"]
    share = (CALIBRATION_FOLDS - 1) / CALIBRATION_FOLDS
    plain = estimate_fit("msvmav", 300, 5, None, params).peak_bytes
    assert estimate["peak_bytes"] == plain + int(share * 300 * 5 * 8)
    seconds = exact_kernel_seconds(300, 5, 7) * (1 + CALIBRATION_FOLDS * share)
    assert estimate["seconds"] == pytest.approx(seconds, abs=1e-3)
