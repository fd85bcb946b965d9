"""/train with every algorithm of solver.ALGORITHMS, their parameters, and cross-validated
searches (the CV table on the model, progress over grid cells, cancel mid-search)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlalchemy import select

from app.jobs.orm import Job
from app.jobs.worker import ProgressReporter
from app.models.orm import Model
from solver import ALGORITHMS
from tests.app.support import (
    assert_png,
    assert_problem,
    assert_svg,
    blobs,
    run_jobs,
    running_job,
    submit,
    to_csv,
    upload,
    wait_for,
)

ALL = list(ALGORITHMS)


def _dataset(client, n: int = 80, **kw) -> dict:
    return upload(client, to_csv(*blobs(n=n, **kw)))


def _model_of(client, job: dict) -> dict:
    job = client.get(f"/jobs/{job['id']}").json()
    assert job["status"] == "succeeded", job
    return client.get(f"/models/{job['model_id']}").json()


def test_the_request_schema_lists_every_solver_algorithm(client):
    spec = client.get("/openapi.json").json()
    enum = spec["components"]["schemas"]["TrainRequest"]["properties"]["algorithm"]["enum"]
    assert enum == ALL


@pytest.mark.parametrize("algorithm", ALL)
def test_train_each_algorithm_then_predict_and_margins(client, worker, algorithm):
    ds = _dataset(client)
    job = submit(client, ds["id"], algorithm=algorithm, test_fraction=0.25, search="none")
    assert "alpha" not in job["params"] or algorithm == "msvmav"  # MSVMAv defaults only for it
    assert run_jobs(worker) == ["succeeded"]
    model = _model_of(client, job)
    assert model["algorithm"] == algorithm
    assert model["holdout_accuracy"] >= 0.9
    assert model["weights"] is not None and len(model["weights"]["coef"][0]) == 3
    assert model["search"] is None
    X, y = blobs(n=10, seed=7)
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": X.tolist(), "labels": y.tolist()}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accuracy"] >= 0.9
    assert {p["label"] for p in body["predictions"]} <= {"neg", "pos"}
    assert all(isinstance(p["decision_value"], float) for p in body["predictions"])
    m = client.get(f"/models/{model['id']}/margins?split=holdout")
    assert m.status_code == 200 and m.json()["n"] == 20


def test_params_reach_the_estimator(client, worker):
    ds = _dataset(client)
    jobs = [
        submit(client, ds["id"], algorithm="svm", params={"C": 0.5, "max_iter": 500}),
        submit(client, ds["id"], algorithm="odm", params={"mu": 0.6, "theta": 0.4}),
        submit(client, ds["id"], algorithm="fmm", params={"n_iter": 7}),
        submit(client, ds["id"], params={"alpha": 2.0}, max_iter=15),
        submit(client, ds["id"], algorithm="svm", max_iter=50),  # top-level field it has
    ]
    assert run_jobs(worker) == ["succeeded"] * 5
    svm, odm, fmm, msvmav, svm2 = (_model_of(client, j) for j in jobs)
    assert svm["params"]["C"] == 0.5 and svm["params"]["max_iter"] == 500
    assert odm["params"]["mu"] == 0.6 and odm["params"]["theta"] == 0.4
    assert fmm["params"]["n_iter"] == 7 and fmm["n_iter"] == 7
    assert msvmav["params"]["alpha"] == 2.0 and msvmav["params"]["max_iter"] == 15
    assert svm2["params"]["max_iter"] == 50 and svm2["params"]["C"] == 1.0  # its own default


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"algorithm": "xgboost"}, "algorithm"),
        ({"algorithm": "svm", "params": {"Cx": 1}}, "params.Cx"),
        ({"algorithm": "svm", "params": {"C": -1}}, "params.C"),
        ({"algorithm": "odm", "params": {"mu": 3}}, "params.mu"),
        ({"algorithm": "svm", "params": {"kernel": "rbf"}}, "params.kernel"),
        ({"algorithm": "svm", "params": {"random_state": 1}}, "params.random_state"),
        ({"algorithm": "svm", "alpha": 3}, "alpha"),
        ({"alpha": 3, "params": {"alpha": 4}}, "params.alpha"),
        ({"params": {"alpha": [1, 2]}}, "params.alpha"),
        ({"search": {"grid": "fast"}}, "search.grid"),
        ({"search": {"grid": {"alphaa": [1]}}}, "search.grid.alphaa"),
        ({"search": {"grid": {"alpha": []}}}, "search.grid.alpha"),
        ({"search": {"grid": {"alpha": [1, -2]}}}, "search.grid.alpha[1]"),
        ({"search": {"grid": {}}}, "search.grid"),
        ({"alpha": 2, "search": {"grid": "quick"}}, "search.grid"),
        ({"params": {"beta": 2}, "search": {"grid": {"beta": [1, 2]}}}, "search.grid.beta"),
        ({"search": {"cv": 1}}, "search.cv"),
        ({"search": {"cv": 20}}, "search.cv"),  # 20 folds of 12 rows
        ({"search": {"grid": "quick", "folds": 3}}, "search.folds"),
    ],
)
def test_invalid_algorithm_params_or_search_answer_422_naming_the_field(client, body, field):
    ds = _dataset(client, n=12)
    r = client.post("/train", json={"dataset_id": ds["id"], **body})
    assert_problem(r, 422, field)
    assert client.get("/jobs").json()["items"] == []  # nothing queued


def test_search_job_keeps_the_cv_table_and_fits_the_best_row(client, worker, engine, monkeypatch):
    X, y = blobs(n=120, seed=3, shift=1.5)  # overlapping: the configurations differ
    ds = upload(client, to_csv(X, y))
    grid = {"alpha": [1, 16], "beta": [0.25, 1]}
    job = submit(
        client,
        ds["id"],
        search={"grid": grid, "cv": 4, "seed": 1},
        test_fraction=0.25,
        max_iter=40,
    )
    assert "alpha" not in job["params"] and "beta" not in job["params"]  # searched, not fixed
    messages: list[tuple[float, str]] = []
    original = ProgressReporter.report

    def spy(self, progress, message):
        messages.append((progress, message))
        original(self, progress, message)

    monkeypatch.setattr(ProgressReporter, "report", spy)
    worker.settings.cancel_check_interval = 0.0
    assert run_jobs(worker) == ["succeeded"]

    cells = [(p, m) for p, m in messages if m.startswith("CV cell ")]
    assert cells, messages
    assert cells[-1][1] == "CV cell 16/16"  # 4 configurations × 4 folds
    progress = [p for p, _ in cells]
    assert progress == sorted(progress) and 0 < progress[-1] < 1
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["progress"] == 1 and body["status"] == "succeeded"

    model = _model_of(client, job)
    search = model["search"]
    table = search["table"]
    assert [row["params"] for row in table] == [
        {"alpha": a, "beta": b} for a in grid["alpha"] for b in grid["beta"]
    ]
    for row in table:
        assert len(row["scores"]) == 4
        assert row["mean_accuracy"] == pytest.approx(np.mean(row["scores"]))
        assert row["std"] == pytest.approx(np.std(row["scores"], ddof=1))
    means = [row["mean_accuracy"] for row in table]
    best = int(np.argmax(means))
    assert search["best_index"] == best
    assert search["best_params"] == table[best]["params"]
    assert search["best_score"] == max(means)
    assert search["cv"] == 4 and search["seed"] == 1 and search["grid"] == grid
    for name, value in search["best_params"].items():
        assert model["params"][name] == value  # the model was fitted with the chosen row
    assert model["params"]["max_iter"] == 40
    assert body["result"]["best_params"] == search["best_params"]
    with engine.connect() as conn:
        assert conn.scalar(select(Model.n_train).where(Model.id == model["id"])) == 90


def test_top_level_seed_reaches_the_search_folds(client, worker):
    # regression: the request's `seed` set the split and the estimator but the folds kept
    # search.seed's default 0
    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.preprocessing import MinMaxScaler

    from solver import MSVMAv

    X, y = blobs(n=60, seed=4, shift=1.0)  # overlapping: fold assignments change the scores
    ds = upload(client, to_csv(X, y))
    grid = {"alpha": [1, 16], "beta": [0.25, 1]}
    job = submit(client, ds["id"], search={"grid": grid, "cv": 3}, seed=5, max_iter=30)
    assert run_jobs(worker) == ["succeeded"]
    search = _model_of(client, job)["search"]
    assert search["seed"] == 5
    Xs = MinMaxScaler().fit_transform(X)  # no hold-out: the search runs on all rows, scaled
    folds = KFold(3, shuffle=True, random_state=5)
    for row in search["table"]:
        expected = cross_val_score(MSVMAv(max_iter=30, **row["params"]), Xs, y, cv=folds)
        assert row["scores"] == pytest.approx(expected.tolist())


def test_search_with_a_named_grid_and_a_comparator(client, worker):
    ds = _dataset(client, n=60)
    job = submit(client, ds["id"], algorithm="svm", search={"grid": "quick", "cv": 3})
    assert job["params"]["search"]["grid_values"] == {"C": [0.0625, 1.0, 16.0]}
    assert run_jobs(worker) == ["succeeded"]
    model = _model_of(client, job)
    assert model["algorithm"] == "svm"
    assert [row["params"]["C"] for row in model["search"]["table"]] == [0.0625, 1.0, 16.0]
    assert model["params"]["C"] == model["search"]["best_params"]["C"]


def test_rbf_quick_search_adds_the_gamma_grid(client, worker):
    ds = _dataset(client, n=40)
    job = submit(
        client, ds["id"], algorithm="lssvm", kernel="rbf", search={"grid": "quick", "cv": 2}
    )
    grid = job["params"]["search"]["grid_values"]
    assert set(grid) == {"C", "gamma"} and grid["gamma"] == [2.0**-4 / 3, 1 / 3, 2.0**4 / 3]
    assert run_jobs(worker) == ["succeeded"]
    model = _model_of(client, job)
    assert len(model["search"]["table"]) == 9
    assert model["params"]["gamma"] == model["search"]["best_params"]["gamma"]


def test_cancel_during_a_search_stops_it(client, worker, engine):
    X, y = blobs(n=400, d=10, seed=5, shift=0.5)
    ds = upload(client, to_csv(X, y))
    # 200 configurations × 5 folds of a plain search (about 5 s), a callback every 50 cells
    grid = {"C": [2.0**k for k in np.linspace(-6, 6, 200).tolist()]}
    job = submit(client, ds["id"], algorithm="svr", search={"grid": grid, "cv": 5})
    with running_job(engine, worker) as (job_id, statuses):
        assert job_id == job["id"]
        wait_for(lambda: client.get(f"/jobs/{job_id}").json()["message"].startswith("CV cell"))
        r = client.post(f"/jobs/{job_id}/cancel")
        assert r.status_code in (200, 202), r.text
        asked = time.monotonic()
    assert time.monotonic() - asked < 10
    assert statuses == ["cancelled"]
    final = client.get(f"/jobs/{job_id}").json()
    assert final["status"] == "cancelled" and final["model_id"] is None
    with engine.connect() as conn:
        assert conn.scalar(select(Model.id)) is None
        assert conn.scalar(select(Job.progress).where(Job.id == job_id)) < 1


def test_cancel_inside_the_first_fold_of_a_linear_msvmav_search(client, worker, engine):
    """The paper grid runs its 121 settings in lockstep, a fold at a time: cancel is noticed
    within an iteration, not when the fold ends."""
    X, y = blobs(n=3000, d=30, seed=6, shift=0.3)
    ds = upload(client, to_csv(X, y))
    job = submit(client, ds["id"], search={"grid": "paper", "cv": 5})
    with running_job(engine, worker) as (job_id, statuses):
        assert job_id == job["id"]
        wait_for(lambda: client.get(f"/jobs/{job_id}").json()["message"] == "CV cell 0/605")
        assert client.post(f"/jobs/{job_id}/cancel").status_code in (200, 202)
    assert statuses == ["cancelled"]
    final = client.get(f"/jobs/{job_id}").json()
    # no cell finished: a fold's 121 cells would have been progress 121/606
    assert final["status"] == "cancelled" and final["progress"] == 0.0, final


def test_model_margins_png_and_svg(client, worker):
    ds = _dataset(client)
    job = submit(client, ds["id"], algorithm="odm", test_fraction=0.25)
    run_jobs(worker)
    model = _model_of(client, job)
    assert_png(client.get(f"/models/{model['id']}/margins.png"))
    svg = assert_svg(client.get(f"/models/{model['id']}/margins.svg?split=holdout"))
    assert "hold-out part" in svg and "ODM (n=20)" in svg  # title and legend
    other = _dataset(client, n=30)
    svg = assert_svg(client.get(f"/models/{model['id']}/margins.svg?dataset_id={other['id']}"))
    assert "ODM (n=30)" in svg
    assert_problem(client.get("/models/999999/margins.png"), 404)
    assert_problem(client.get(f"/models/{model['id']}/margins.png?split=test"), 422, "split")


def test_model_margins_png_holdout_needs_a_holdout(client, worker):
    ds = _dataset(client)
    job = submit(client, ds["id"], max_iter=10)
    run_jobs(worker)
    model = _model_of(client, job)
    assert_problem(client.get(f"/models/{model['id']}/margins.png?split=holdout"), 422, "split")
