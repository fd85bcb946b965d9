"""The leaderboard (GET /datasets/{id}/leaderboard, POST /models/leaderboard) on SQLite, and on
PostgreSQL when TEST_DATABASE_URL is set: every metric checked against an independent
computation — the shared hold-out rows scored through /predict, measured here with
sklearn.metrics (and the ECE and the cost written out) — on models of one hold-out, of
overlapping hold-outs, of disjoint ones and of different datasets, binary and multi-class."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics

from solver.protocol import split_indices
from tests.app.support import assert_problem, blobs, run_jobs, submit, to_csv, upload


def _data(n: int = 160, classes=("neg", "pos"), shift: float = 1.6, seed: int = 0):
    X, y = blobs(n=n, d=3, seed=seed, classes=classes, shift=shift)
    return np.round(X, 6), y  # as the CSV holds them


def _train(client, worker, dataset_id: int, **params) -> dict:
    job = submit(client, dataset_id, **{"max_iter": 40, **params})
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    return client.get(f"/models/{model_id}").json()


def _ece(y_index: np.ndarray, P: np.ndarray, bins: int = 10) -> float:
    """Top-label ECE written out: per equal-width bin of the top probability (a value on an
    inner edge goes to the bin above, as numpy.digitize), |accuracy - confidence| weighted."""
    top = P.max(axis=1)
    correct = P.argmax(axis=1) == y_index
    which = np.clip(np.digitize(top, np.linspace(0, 1, bins + 1)[1:-1]), 0, bins - 1)
    return float(sum(abs(correct[which == b].mean() - top[which == b].mean()) * np.sum(which == b)
                     for b in range(bins) if np.any(which == b)) / len(top))


def _expected(client, model: dict, X: np.ndarray, y: np.ndarray, rows, cost: np.ndarray | None,
              ref: str | None = None):
    """The model's metrics on dataset rows ``rows``, from /predict's answers (by ``ref`` when
    given: the labels its alias's rule makes)."""
    named = {"model": ref} if ref else {"model_id": model["id"]}
    r = client.post("/predict", json={**named, "instances": X[rows].tolist()})
    assert r.status_code == 200, r.text
    answer = r.json()
    classes = answer["classes"]
    preds = answer["predictions"]
    y_true = np.asarray(y)[rows]
    labels = np.array([p["label"] for p in preds])
    if len(classes) == 2:
        D = np.array([p["decision_value"] for p in preds])
        auc = metrics.roc_auc_score(y_true == classes[1], D)
        ap = metrics.average_precision_score(y_true == classes[1], D)
    else:
        D = np.array([p["decision_values"] for p in preds])
        auc = np.mean([metrics.roc_auc_score(y_true == c, D[:, j]) for j, c in enumerate(classes)])
        ap = np.mean([metrics.average_precision_score(y_true == c, D[:, j])
                      for j, c in enumerate(classes)])
    out = {"accuracy": metrics.accuracy_score(y_true, labels),
           "balanced_accuracy": metrics.balanced_accuracy_score(y_true, labels),
           "roc_auc": auc, "pr_auc": ap, "log_loss": None, "ece": None, "expected_cost": None}
    if preds[0].get("probabilities") is not None:
        P = np.array([[p["probabilities"][str(c)] for c in classes] for p in preds])
        out["log_loss"] = metrics.log_loss(y_true, P, labels=classes)
        out["ece"] = _ece(np.array([classes.index(v) for v in y_true]), P)
    if cost is not None:
        true_i = [classes.index(v) for v in y_true]
        pred_i = [classes.index(v) for v in labels]
        per_row = np.array([cost[i, j] for i, j in zip(true_i, pred_i, strict=True)])
        out["expected_cost"] = float(np.mean(per_row))
        # its 95 % interval: scipy's BCa bootstrap of the mean (2,000 resamples, seed 0)
        ci = stats.bootstrap((per_row,), np.mean, n_resamples=2000, random_state=0)
        low, high = ci.confidence_interval
        assert low <= out["expected_cost"] <= high
        out["expected_cost_interval"] = [float(low), float(high)]
    return out


def _check(entry: dict, expected: dict) -> None:
    for name, value in expected.items():
        if value is None:
            assert entry[name] is None and name in entry["notes"], (name, entry)
        else:
            assert entry[name] == pytest.approx(value, abs=1e-9), (name, entry[name], value)


@pytest.fixture
def binary(client, worker):
    """Three models of one dataset on one hold-out (same test_fraction and seed): MSVMAv
    calibrated, the SVM comparator calibrated, MSVMAv uncalibrated."""
    X, y = _data()
    ds = upload(client, to_csv(X, y))
    common = {"test_fraction": 0.3, "seed": 2}
    ms = [_train(client, worker, ds["id"], **common),
          _train(client, worker, ds["id"], algorithm="svm", **common),
          _train(client, worker, ds["id"], calibration="none", **common)]
    return ds, X, y, ms


def test_dataset_leaderboard_equals_sklearn_on_the_holdout(client, binary):
    ds, X, y, ms = binary
    rows = ms[0]["holdout"]["rows"]
    assert all(m["holdout"]["rows"] == rows for m in ms)
    r = client.get(f"/datasets/{ds['id']}/leaderboard",
                   params={"metric": "expected_cost", "cost_fp": 5, "cost_fn": 1})
    assert r.status_code == 200, r.text
    board = r.json()
    assert board["comparable"] is True and board["reason"] is None
    assert (board["dataset_id"], board["n_rows"], board["n_models"]) == (ds["id"], len(rows), 3)
    assert board["cost"] == {"labels": ["neg", "pos"], "matrix": [[0, 5], [1, 0]],
                             "positive_class": "pos"}
    cost = np.array([[0.0, 5.0], [1.0, 0.0]])
    by_id = {e["model_id"]: e for e in board["models"]}
    assert sorted(by_id) == sorted(m["id"] for m in ms) and board["excluded"] == []
    for m in ms:
        _check(by_id[m["id"]], _expected(client, m, X, y, rows, cost))
        # the same rows as the model's own hold-out evaluation
        assert by_id[m["id"]]["accuracy"] == pytest.approx(m["evaluation"]["accuracy"])
    uncalibrated = by_id[ms[2]["id"]]
    assert "not calibrated" in uncalibrated["notes"]["ece"]
    # best first, the least expected cost marked
    costs = [e["expected_cost"] for e in board["models"]]
    assert costs == sorted(costs) and board["models"][0]["rank"] == 1
    least = [e["model_id"] for e in board["models"] if e["expected_cost"] == costs[0]]
    assert board["best"] == least
    assert all(e["best"] == (e["model_id"] in board["best"]) for e in board["models"])
    # another metric: ROC AUC, higher is better; without a cost rule expected_cost is null
    board = client.get(f"/datasets/{ds['id']}/leaderboard", params={"metric": "roc_auc"}).json()
    assert board["higher_is_better"] is True and board["cost"] is None
    aucs = [e["roc_auc"] for e in board["models"]]
    assert aucs == sorted(aucs, reverse=True)
    assert all(e["expected_cost"] is None and "no cost rule" in e["notes"]["expected_cost"]
               for e in board["models"])
    # log loss: the uncalibrated model has none, so it ranks last and is never best
    board = client.get(f"/datasets/{ds['id']}/leaderboard", params={"metric": "log_loss"}).json()
    assert board["models"][-1]["model_id"] == ms[2]["id"] and not board["models"][-1]["best"]
    # bounded: limit takes the newest, and says so
    board = client.get(f"/datasets/{ds['id']}/leaderboard", params={"limit": 2}).json()
    assert sorted(e["model_id"] for e in board["models"]) == sorted(m["id"] for m in ms[1:])
    assert board["truncated"] is True and board["n_models"] == 2


def test_references_and_registry_aliases(client, binary):
    _ds, X, y, ms = binary
    assert client.post("/registered-models", json={"name": "lb"}).status_code == 201
    client.post("/registered-models/lb/versions", json={"model_id": ms[1]["id"]})
    client.put("/registered-models/lb/aliases/production", json={"version": 1})
    r = client.post("/models/leaderboard",
                    json={"models": [str(ms[0]["id"]), "lb@production"], "metric": "accuracy"})
    assert r.status_code == 200, r.text
    board = r.json()
    by_id = {e["model_id"]: e for e in board["models"]}
    aliased = by_id[ms[1]["id"]]
    assert (aliased["reference"], aliased["model"], aliased["version"], aliased["alias"]) == (
        "lb@production", "lb", 1, "production")
    assert by_id[ms[0]["id"]]["model"] is None
    rows = ms[0]["holdout"]["rows"]
    for m in ms[:2]:
        _check(by_id[m["id"]], _expected(client, m, X, y, rows, None))
    assert aliased["decision_rule"]["source"] == "default"
    # a rule stored on the alias labels what lb@production serves, so the leaderboard measures
    # those labels (as /predict by that reference gives them); by id, the model's own
    r = client.post("/models/lb@production/threshold",
                    json={"objective": {"cost_fp": 1, "cost_fn": 20}})
    assert r.status_code == 200, r.text
    cost = np.array([[0.0, 1.0], [20.0, 0.0]])
    body = {"models": ["lb@production", str(ms[1]["id"])], "metric": "expected_cost",
            "cost_fp": 1, "cost_fn": 20}
    assert_problem(client.post("/models/leaderboard", json=body), 422, "models[1]")
    body["models"] = ["lb@production", str(ms[0]["id"])]
    board = client.post("/models/leaderboard", json=body).json()
    by_ref = {e["reference"]: e for e in board["models"]}
    ruled = by_ref["lb@production"]
    assert ruled["decision_rule"]["source"] == "alias"
    assert ruled["decision_rule"]["rule"]["kind"] == "threshold"
    _check(ruled, _expected(client, ms[1], X, y, rows, cost, ref="lb@production"))
    plain = _expected(client, ms[1], X, y, rows, cost)
    served = client.post("/predict", json={"model": "lb@production",
                                          "instances": X[rows].tolist()}).json()
    by_id_labels = client.post("/predict", json={"model_id": ms[1]["id"],
                                                "instances": X[rows].tolist()}).json()
    # (not vacuous: the alias's rule changes labels on these rows, and so the cost)
    assert [p["label"] for p in served["predictions"]] != [
        p["label"] for p in by_id_labels["predictions"]]
    assert ruled["expected_cost"] != pytest.approx(plain["expected_cost"], abs=1e-12)


def test_different_holdouts_are_compared_on_the_rows_they_share(client, worker):
    X, y = _data(n=200)
    ds = upload(client, to_csv(X, y))
    a = _train(client, worker, ds["id"], test_fraction=0.5, seed=1)
    b = _train(client, worker, ds["id"], test_fraction=0.5, seed=2, algorithm="svm")
    none = _train(client, worker, ds["id"], test_fraction=None)
    shared = sorted(set(a["holdout"]["rows"]) & set(b["holdout"]["rows"]))
    assert 0 < len(shared) < len(a["holdout"]["rows"])
    board = client.post("/models/leaderboard", json={"dataset_id": ds["id"]}).json()
    assert board["comparable"] is True and board["n_rows"] == len(shared)
    assert board["excluded"] == [{"model_id": none["id"], "reason": board["excluded"][0]["reason"]}]
    assert "kept no hold-out" in board["excluded"][0]["reason"]
    by_id = {e["model_id"]: e for e in board["models"]}
    assert set(by_id) == {a["id"], b["id"]}
    for m in (a, b):
        _check(by_id[m["id"]], _expected(client, m, X, y, shared, None))
        assert by_id[m["id"]]["n_holdout"] == len(m["holdout"]["rows"])


def _disjoint_seeds(y, fraction: float) -> tuple[int, int]:
    """Two seeds whose hold-outs of ``y`` share no row (split_indices as /train splits)."""
    first = set(split_indices(np.asarray(y), fraction, 0)[1].tolist())
    for seed in range(1, 200):
        if not first & set(split_indices(np.asarray(y), fraction, seed)[1].tolist()):
            return 0, seed
    raise AssertionError("no disjoint pair")


def test_models_that_share_no_row_or_dataset_are_not_compared(client, worker):
    X, y = _data(n=120)
    ds = upload(client, to_csv(X, y))
    s0, s1 = _disjoint_seeds(y, 0.05)
    a = _train(client, worker, ds["id"], test_fraction=0.05, seed=s0)
    b = _train(client, worker, ds["id"], test_fraction=0.05, seed=s1)
    assert not set(a["holdout"]["rows"]) & set(b["holdout"]["rows"])
    board = client.get(f"/datasets/{ds['id']}/leaderboard").json()
    assert board["comparable"] is False and board["models"] == [] and board["n_rows"] == 0
    assert "share no row" in board["reason"] and board["best"] == []
    X2, y2 = _data(n=120, seed=5)
    other = _train(client, worker, upload(client, to_csv(X2, y2))["id"], test_fraction=0.3)
    board = client.post("/models/leaderboard",
                        json={"models": [str(a["id"]), str(other["id"])]}).json()
    assert board["comparable"] is False and "different datasets" in board["reason"]
    assert board["models"] == []


def test_multiclass_with_a_cost_matrix(client, worker):
    X, y = _data(n=180, classes=(1, 2, 3), shift=1.8, seed=3)
    ds = upload(client, to_csv(X, y))
    ms = [_train(client, worker, ds["id"], test_fraction=0.3, seed=4),
          _train(client, worker, ds["id"], test_fraction=0.3, seed=4, algorithm="svm")]
    C = [[0, 1, 4], [2, 0, 1], [8, 1, 0]]
    r = client.post("/models/leaderboard",
                    json={"dataset_id": ds["id"], "metric": "expected_cost", "cost_matrix": C})
    assert r.status_code == 200, r.text
    board = r.json()
    assert board["cost"]["labels"] == [1, 2, 3] and board["cost"]["positive_class"] is None
    rows = ms[0]["holdout"]["rows"]
    by_id = {e["model_id"]: e for e in board["models"]}
    for m in ms:
        _check(by_id[m["id"]], _expected(client, m, X, y, rows, np.asarray(C, dtype=float)))
    r = client.get(f"/datasets/{ds['id']}/leaderboard", params={"cost_fp": 1, "cost_fn": 2})
    assert "cost_matrix" in assert_problem(r, 422, "cost_fp")["detail"]
    r = client.post("/models/leaderboard", json={"dataset_id": ds["id"], "cost_matrix": [[0, 1],
                                                                                          [1, 0]]})
    assert_problem(r, 422, "cost_matrix")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"models": ["1"], "metric": "f1"}, "metric"),
        ({"models": []}, "models"),
        ({"models": [str(i) for i in range(1, 22)]}, "models"),
        ({}, "models"),
        ({"models": ["1"], "dataset_id": 1}, "models"),
        ({"models": ["not a ref!"]}, "models[0]"),
        ({"models": ["1"], "metric": "expected_cost"}, "metric"),
        ({"models": ["1"], "cost_fp": 1}, "cost_fn"),
        ({"models": ["1"], "cost_fp": -1, "cost_fn": 1}, "cost_fp"),
        ({"models": ["1"], "cost_fp": 1, "cost_fn": 1, "cost_matrix": [[0, 1], [1, 0]]},
         "cost_matrix"),
        ({"models": ["1"], "cost_matrix": [[0, 1], [1]]}, "cost_matrix[1]"),
        ({"models": ["1"], "cost_matrix": [[0, -1], [1, 0]]}, "cost_matrix[0][1]"),
        ({"dataset_id": 1, "limit": 21}, "limit"),
        ({"models": ["1"], "colour": "red"}, "colour"),
    ],
)
def test_bad_requests_name_the_field(client, body, field):
    assert_problem(client.post("/models/leaderboard", json=body), 422, field)


def test_unknown_and_repeated_models_and_datasets(client, binary):
    ds, _X, _y, ms = binary
    assert_problem(client.post("/models/leaderboard", json={"models": ["999999"]}), 404)
    assert_problem(client.post("/models/leaderboard", json={"models": ["nobody@production"]}), 404)
    first = str(ms[0]["id"])
    r = client.post("/models/leaderboard", json={"models": [first, first]})
    assert "already given as models[0]" in assert_problem(r, 422, "models[1]")["detail"]
    assert_problem(client.get("/datasets/999999/leaderboard"), 404)
    assert_problem(client.post("/models/leaderboard", json={"dataset_id": 999999}), 404,
                   "dataset_id")
    r = client.get(f"/datasets/{ds['id']}/leaderboard", params={"metric": "f1"})
    assert_problem(r, 422, "metric")
    r = client.get(f"/datasets/{ds['id']}/leaderboard", params={"cost_fp": "inf", "cost_fn": 1})
    assert_problem(r, 422, "cost_fp")
    r = client.get(f"/datasets/{ds['id']}/leaderboard", params={"limit": 0})
    assert_problem(r, 422, "limit")
