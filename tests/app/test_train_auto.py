"""/train's default auto search (issue 49): with only a dataset_id the job races MSVMAv's
kernels within a stated budget, says what it chose and why, and the model has a hold-out
evaluation, a convergence flag with its rule, and probabilities calibrated on the race's
out-of-fold decision values. On both databases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from solver.auto_search import default_budget
from tests.app.support import assert_problem, blobs, run_jobs, submit, to_csv, upload

WDBC = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "wdbc.arff"

pytestmark = pytest.mark.postgres


def _finished(client, worker, job: dict) -> tuple[dict, dict]:
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    job = client.get(f"/jobs/{job['id']}").json()
    return job, client.get(f"/models/{job['model_id']}").json()


def test_train_with_only_a_dataset_id_runs_the_auto_search(client, worker):
    if not WDBC.exists():
        pytest.skip(f"{WDBC} is not here")
    ds = upload(client, WDBC.read_bytes(), filename="wdbc.arff", label="Class")
    job, model = _finished(client, worker, submit(client, ds["id"]))
    n_train = 569 - 114  # the default 20 % hold-out: ceil(0.2 * 569) = 114
    budget = default_budget(n_train, 30)
    assert job["params"]["search"]["grid"] == "auto"
    assert job["params"]["search"]["kernels"] == ["linear", "rbf"]
    result = job["result"]["search"]
    assert result["mode"] == "auto" and result["budget_seconds"] == budget
    assert f"a {budget:g} s budget" in job["message"]
    assert f"auto search chose {result['chosen']}" in job["message"]
    tried = result["tried"]
    assert len(tried) == model["search"]["n_configs"] > 9  # linear and rbf candidates
    # "final fit over budget": a finalist whose final fit, predicted again from its full
    # folds, no longer fits what is left (load-dependent: with tol 1e-3 the race's cells stop
    # sooner, and more finalists finish their folds before the budget runs out)
    assert {row["status"] for row in tried} <= {"finalist", "dropped at rung 0",
                                                 "stopped: budget", "skipped: budget",
                                                 "finalist: final fit over budget"}
    winner = model["search"]["table"][model["search"]["best_index"]]
    assert winner["status"] == "finalist" and winner["folds"] == model["search"]["cv"] == 3
    assert winner["mean_accuracy"] == max(r["mean_accuracy"] for r in tried
                                          if r["status"] == "finalist")
    assert result["reason"].startswith("highest mean accuracy over 3 stratified folds")
    # the winner is what the model is
    assert model["params"]["kernel"] == winner["kernel"] == result["kernel"]
    for name, value in winner["params"].items():
        assert model["params"][name] == pytest.approx(value)
    # an evaluation on the hold-out, and a convergence flag with its rule
    assert model["evaluation"]["n"] == 114 and len(model["holdout"]["rows"]) == 114
    assert model["evaluation"]["accuracy"] > 0.9
    assert isinstance(model["converged"], bool)
    assert model["params"]["stop"] == "objective" and model["tol"] == 1e-3
    warned = [w for w in model["warnings"] if "did not converge" in w]
    assert bool(warned) == (not model["converged"])
    # probabilities, calibrated from the race's folds
    assert model["calibration"] == "sigmoid"


def test_small_dataset_auto_search_reports_cross_validated_metrics_from_its_folds(
        client, worker):
    X, y = blobs(n=60, d=3)
    ds = upload(client, to_csv(X, y))
    job, model = _finished(client, worker, submit(client, ds["id"], calibration="none"))
    assert job["params"]["search"]["grid"] == "auto"
    assert model["holdout"] is None
    assert model["evaluation"]["source"] == "cross-validated"
    (warning,) = [w for w in model["warnings"] if "no hold-out" in w]
    assert "3-fold cross-validated" in warning and "optimistic" in warning


def test_a_given_hyper_parameter_means_no_default_search(client, worker):
    X, y = blobs(n=120, d=3)
    ds = upload(client, to_csv(X, y))
    job = submit(client, ds["id"], alpha=4.0, calibration="none")
    assert "search" not in job["params"] or job["params"]["search"] is None
    job, model = _finished(client, worker, job)
    assert model["search"] is None and model["params"]["alpha"] == 4.0


def test_auto_with_a_given_kernel_and_budget(client, worker):
    X, y = blobs(n=150, d=3)
    ds = upload(client, to_csv(X, y))
    job = submit(client, ds["id"], kernel="linear", calibration="none",
                 search={"grid": "auto", "budget_seconds": 5})
    job, model = _finished(client, worker, job)
    assert job["result"]["search"]["budget_seconds"] == 5
    assert {row["setting"].split()[1] for row in job["result"]["search"]["tried"]} == {"linear"}
    assert model["params"]["kernel"] == "linear" and "a 5 s budget" in job["message"]


def test_search_by_name(client, worker):
    X, y = blobs(n=120, d=3)
    ds = upload(client, to_csv(X, y))
    job = submit(client, ds["id"], search="none", calibration="none")
    assert job["params"].get("search") is None
    job = submit(client, ds["id"], search="quick", calibration="none")
    assert job["params"]["search"]["grid"] == "quick"
    assert run_jobs(worker) == ["succeeded", "succeeded"]


@pytest.mark.parametrize(("body", "field"), [
    ({"search": {"grid": "quick", "budget_seconds": 10}}, "search.budget_seconds"),
    ({"search": {"grid": "paper", "algorithms": ["svm"]}}, "search.algorithms"),
    ({"search": {"grid": "auto", "budget_seconds": 0}}, "search.budget_seconds"),
    ({"search": {"grid": "auto", "budget_seconds": -1}}, "search.budget_seconds"),
    ({"search": {"grid": "auto", "algorithms": ["nope"]}}, "search.algorithms[0]"),
    ({"search": {"grid": "auto", "algorithms": []}}, "search.algorithms"),
    ({"search": "everything"}, "search"),
    ({"search": "auto", "kernel": "poly"}, "kernel"),
])
def test_bad_search_requests_name_the_field(client, body, field):
    X, y = blobs(n=120, d=3)
    ds = upload(client, to_csv(X, y))
    r = client.post("/train", json={"dataset_id": ds["id"], **body})
    assert_problem(r, 422, field)


def test_auto_search_result_probabilities_are_a_distribution(client, worker):
    X, y = blobs(n=150, d=3)
    ds = upload(client, to_csv(X, y))
    job, model = _finished(client, worker, submit(client, ds["id"]))
    r = client.post("/predict", json={"model_id": model["id"], "instances": X[:5].tolist()})
    assert r.status_code == 200, r.text
    answer = r.json()
    P = np.asarray([[p["probabilities"][str(c)] for c in answer["classes"]]
                    for p in answer["predictions"]])
    assert P.shape == (5, 2) and np.allclose(P.sum(axis=1), 1.0)
