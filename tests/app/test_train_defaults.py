"""/train with defaults (issue 49): the kernel width fits the data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from solver.scaling import MinMaxScaling
from tests.app.support import blobs, run_jobs, submit, to_csv, trained_model, upload


def test_default_rbf_width_is_scale_of_the_scaled_training_rows(client, worker):
    X, y = blobs(n=60, d=4)
    model = trained_model(client, worker, to_csv(X, y), kernel="rbf", calibration="none")
    Xs = MinMaxScaling.fit(X).transform(X)  # every row trains: the scaling is fitted on all
    gamma = model["kernel_summary"]["gamma"]
    assert gamma == pytest.approx(1.0 / (X.shape[1] * np.var(Xs)), rel=1e-6)
    assert model["params"]["gamma"] == "scale"


def test_auto_width_is_one_over_d(client, worker):
    X, y = blobs(n=60, d=4)
    model = trained_model(client, worker, to_csv(X, y), kernel="rbf", gamma="auto",
                          calibration="none")
    assert model["kernel_summary"]["gamma"] == pytest.approx(0.25, rel=1e-12)


def test_fit_that_runs_out_of_iterations_warns_in_the_model_and_the_job(client, worker):
    X, y = blobs(n=80, d=3, shift=1.0)
    model = trained_model(client, worker, to_csv(X, y), max_iter=3, calibration="none")
    assert model["converged"] is False
    (warning,) = [w for w in model["warnings"] if "did not converge" in w]
    assert "max_iter=3" in warning
    job = client.get(f"/jobs/{model['job_id']}").json()
    assert "did not converge" in job["message"]


def test_default_train_keeps_a_stratified_holdout_with_its_rows(client, worker):
    X, y = blobs(n=150, d=3)
    model = trained_model(client, worker, to_csv(X, y), calibration="none")
    rows = model["holdout"]["rows"]
    assert len(rows) == 30 == model["holdout"]["n"]  # ceil(0.2 * 150)
    assert rows == sorted(set(rows)) and rows[0] >= 0 and rows[-1] < 150
    # stratified: both classes held out in proportion (75 each)
    assert sorted(np.unique(y[rows], return_counts=True)[1].tolist()) == [15, 15]
    assert model["evaluation"]["n"] == 30 and model["n_train"] == 120
    assert model["evaluation"]["accuracy"] == pytest.approx(model["holdout"]["accuracy"])
    job = client.get(f"/jobs/{model['job_id']}").json()
    assert job["params"]["test_fraction"] == 0.2


def test_small_dataset_gets_cross_validated_evaluation_with_a_warning(client, worker):
    X, y = blobs(n=60, d=3)
    model = trained_model(client, worker, to_csv(X, y), calibration="none")
    assert model["holdout"] is None and model["n_train"] == 60
    assert model["evaluation"]["source"] == "cross-validated"
    assert model["evaluation"]["n"] == 60
    (warning,) = [w for w in model["warnings"] if "no hold-out" in w]
    assert "60 rows, fewer than 100" in warning and "cross-validated" in warning


WDBC = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "wdbc.arff"


def test_default_train_on_real_data_converges(client, worker):
    """/train's default stopping rule (the relative change of SV/θ², tol 1e-3) is met by a
    default linear fit on wdbc (569 rows)."""
    if not WDBC.exists():
        pytest.skip(f"{WDBC} is not here")
    ds = upload(client, WDBC.read_bytes(), filename="wdbc.arff", label="Class")
    job = submit(client, ds["id"], calibration="none")
    assert run_jobs(worker) == ["succeeded"]
    job = client.get(f"/jobs/{job['id']}").json()
    model = client.get(f"/models/{job['model_id']}").json()
    assert model["converged"] is True and model["n_iter"] < 100
    assert not [w for w in model["warnings"] if "did not converge" in w]
