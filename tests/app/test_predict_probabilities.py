"""Calibrated probabilities, the hold-out evaluation, convergence and explanations through the
service (SQLite, and PostgreSQL when TEST_DATABASE_URL is set): every number checked against
an independent computation (sklearn.metrics, the library's estimator, w_j (x_j - b_j))."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics
from sqlalchemy.orm import Session

from app.serving.acquire import cold
from solver.protocol import split_indices
from tests.app.support import assert_problem, blobs, to_csv, trained_model


def _estimator(engine, model_id: int):
    with Session(engine) as session:
        return cold(session, model_id)


def _predict(client, model_id: int, rows, **extra):
    r = client.post("/predict", json={"model_id": model_id, "instances": rows, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def _multi_data(n: int = 150, seed: int = 3):
    X, y = blobs(n=n, d=3, seed=seed, classes=(1, 2, 3), shift=2.0)
    return np.vectorize(lambda v: float(f"{v:.6f}"))(X), y  # as the CSV holds them


def test_probabilities_equal_the_library_and_evaluation_equals_sklearn(client, worker, engine):
    X, y = _multi_data()
    # max_iter 60: /train's stopping rule (stop "objective", tol 1e-3) is met within it
    model = trained_model(client, worker, to_csv(X, y), test_fraction=0.3, seed=4, max_iter=60)
    assert model["calibration"] == "sigmoid"
    assert model["params"]["stop"] == "objective" and model["converged"] is True
    loaded = _estimator(engine, model["id"])
    # converged: each one-vs-rest task's objective J = SV/theta^2 met |J_k - J_{k-5}| <= 5 tol J_k
    # first at its last iteration k; last_relative_change: the largest task's last step
    tol, history = model["tol"], loaded.estimator.history_
    tasks = [[r for r in history if r["task"] == t] for t in range(3)]
    for records in tasks:
        J = [r["objective"] for r in records]
        assert len(J) > 6 and abs(J[-1] - J[-6]) <= 5 * tol * abs(J[-1]), J[-6:]
        assert abs(J[-2] - J[-7]) > 5 * tol * abs(J[-2]), J[-7:]  # met first at k
    assert model["last_relative_change"] == max(records[-1]["step"] for records in tasks)
    answer = _predict(client, model["id"], X.tolist())
    P = np.array(
        [[p["probabilities"][str(c)] for c in answer["classes"]] for p in answer["predictions"]]
    )
    expected = loaded.estimator.predict_proba(loaded.scaling.transform(X))
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-12)
    own = [p["probability"] for p in answer["predictions"]]
    labels = [p["label"] for p in answer["predictions"]]
    index = [answer["classes"].index(label) for label in labels]
    np.testing.assert_allclose(own, P[np.arange(len(P)), index], rtol=0, atol=0)

    # The hold-out evaluation: the same split, scored by /predict, measured by sklearn here.
    _, test = split_indices(np.asarray(y), 0.3, 4)
    held = _predict(client, model["id"], X[test].tolist())
    y_true = np.asarray(y)[test]
    y_pred = np.array([p["label"] for p in held["predictions"]])
    D = np.array([p["decision_values"] for p in held["predictions"]])
    Ph = np.array(
        [[p["probabilities"][str(c)] for c in held["classes"]] for p in held["predictions"]]
    )
    ev = model["evaluation"]
    assert ev["n"] == len(test)
    assert ev["accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred), abs=1e-12)
    assert ev["balanced_accuracy"] == pytest.approx(
        metrics.balanced_accuracy_score(y_true, y_pred), abs=1e-12
    )
    assert ev["log_loss"] == pytest.approx(metrics.log_loss(y_true, Ph, labels=[1, 2, 3]), abs=1e-9)
    macro = np.mean([metrics.roc_auc_score(y_true == c, D[:, j]) for j, c in enumerate((1, 2, 3))])
    assert ev["roc_auc"]["macro"] == pytest.approx(macro, abs=1e-12)
    assert ev["confusion_matrix"]["matrix"] == metrics.confusion_matrix(y_true, y_pred).tolist()
    majority = max(np.mean(y_true == c) for c in (1, 2, 3))
    assert ev["majority_baseline"] == pytest.approx(majority)
    assert ev["beats_baseline"] is True and model["warnings"] == []


def test_calibration_none_gives_no_probabilities(client, worker):
    X, y = blobs(n=60)
    model = trained_model(client, worker, to_csv(X, y), calibration="none")
    assert model["calibration"] == "none"
    p = _predict(client, model["id"], X[:3].tolist())["predictions"][0]
    assert p["probability"] is None and p["probabilities"] is None
    r = client.post("/train", json={"dataset_id": model["dataset_id"], "calibration": "platt"})
    assert_problem(r, 422, "calibration")
    r = client.post(
        "/train", json={"dataset_id": model["dataset_id"], "params": {"calibration": "none"}}
    )
    assert_problem(r, 422)


def test_a_model_at_the_majority_baseline_says_so(client, worker):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(rng.random(200) < 0.85, "ok", "defect")  # labels independent of X
    model = trained_model(client, worker, to_csv(X, y), test_fraction=0.4, alpha=1, beta=1)
    ev = model["evaluation"]
    assert ev["beats_baseline"] is False and ev["majority_class"] == "ok"
    assert any("majority-class baseline" in w for w in model["warnings"])
    job = client.get(f"/jobs/{model['job_id']}").json()
    assert "majority-class baseline" in job["message"]


def _mixed(n: int = 90, seed: int = 1):
    rng = np.random.default_rng(seed)
    colors = np.array(["red", "green", "blue"])[np.arange(n) % 3]
    y = np.where(np.arange(n) % 2 == 0, "yes", "no")
    x0 = np.where(y == "yes", 2.0, -2.0) + rng.normal(size=n)
    x1 = rng.normal(size=n)
    lines = ["x0,color,x1,y"] + [
        f"{a:.6f},{c},{b:.6f},{t}" for a, c, b, t in zip(x0, colors, x1, y, strict=True)
    ]
    rows = [
        [round(float(a), 6), str(c), round(float(b), 6)]
        for a, c, b in zip(x0, colors, x1, strict=True)
    ]
    return ("\n".join(lines) + "\n").encode(), rows


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_explanations_are_complete_per_raw_column(client, worker, engine, kernel):
    content, rows = _mixed()
    model = trained_model(client, worker, content, kernel=kernel)
    answer = _predict(client, model["id"], rows[:12], explain=True)
    summary = answer["explanation"]
    assert summary["method"] == ("linear" if kernel == "linear" else "integrated-gradients-rbf")
    assert set(summary["baseline"]) == {"x0", "color=blue", "color=green", "color=red", "x1"}
    for p in answer["predictions"]:
        explanation = p["explanation"]
        assert list(explanation["contributions"]) == ["x0", "color", "x1"]  # raw columns
        total = explanation["baseline_decision"] + sum(explanation["contributions"].values())
        assert total == pytest.approx(p["decision_value"], abs=1e-6)
    if kernel == "linear":  # exactly w_j (x_j - b_j), one-hot columns summed
        loaded = _estimator(engine, model["id"])
        est = loaded.estimator
        from app.ingest import Encoder

        Xs = loaded.scaling.transform(Encoder.from_dict(loaded.encoding).transform_rows(rows[:12]))
        terms = (Xs - est.feature_means_) * np.asarray(est.coef_).ravel()
        got = np.array(
            [list(p["explanation"]["contributions"].values()) for p in answer["predictions"]]
        )
        np.testing.assert_allclose(got[:, 0], terms[:, 0], atol=1e-12)
        np.testing.assert_allclose(got[:, 1], terms[:, 1:4].sum(axis=1), atol=1e-12)
        np.testing.assert_allclose(got[:, 2], terms[:, 4], atol=1e-12)


def test_multiclass_explanation_explains_the_predicted_class(client, worker):
    X, y = _multi_data(n=90)
    model = trained_model(client, worker, to_csv(X, y), kernel="rbf")
    answer = _predict(client, model["id"], X[:10].tolist(), explain=True)
    for p in answer["predictions"]:
        e = p["explanation"]
        total = e["baseline_decision"] + sum(e["contributions"].values())
        assert total == pytest.approx(p["decision_value"], abs=1e-6)


def test_explaining_is_refused_over_its_cost_bound(client, worker, settings):
    X, y = blobs(n=60)
    model = trained_model(client, worker, to_csv(X, y), kernel="rbf")
    client.app.state.settings.max_explain_work = 1000
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": X.tolist(), "explain": True}
    )
    body = assert_problem(r, 422, "explain")
    assert "MSVMAV_MAX_EXPLAIN_WORK" in body["detail"]
    assert _predict(client, model["id"], X.tolist())["n"] == 60  # scoring alone is fine


def test_evaluate_on_a_file_and_a_dataset_equals_sklearn(client, worker):
    X, y = _multi_data(n=150, seed=5)
    model = trained_model(client, worker, to_csv(X[:100], y[:100]))
    content = to_csv(X[100:], y[100:])
    r = client.post(f"/models/{model['id']}/evaluate", files={"file": ("rows.csv", content)})
    assert r.status_code == 200, r.text
    by_file = r.json()
    answer = _predict(client, model["id"], X[100:].tolist())  # the door's own numbers
    y_true = np.asarray(y[100:])
    y_pred = np.array([p["label"] for p in answer["predictions"]])
    P = np.array([[p["probabilities"][str(c)] for c in (1, 2, 3)] for p in answer["predictions"]])
    m = by_file["metrics"]
    assert (by_file["source"], by_file["n"], m["n"]) == ("file", 50, 50)
    assert m["accuracy"] == pytest.approx(metrics.accuracy_score(y_true, y_pred), abs=1e-12)
    assert m["log_loss"] == pytest.approx(metrics.log_loss(y_true, P, labels=[1, 2, 3]), abs=1e-9)
    brier = metrics.brier_score_loss(y_true, P, labels=[1, 2, 3])
    assert m["brier"] == pytest.approx(brier, abs=1e-12)
    precision, recall, f1, support = metrics.precision_recall_fscore_support(y_true, y_pred)
    assert [c["precision"] for c in m["per_class"]] == pytest.approx(precision.tolist())
    assert [c["support"] for c in m["per_class"]] == support.tolist()
    roc = by_file["curves"]["roc"]
    assert [c["label"] for c in roc] == [1, 2, 3]
    D = np.array([p["decision_values"] for p in answer["predictions"]])
    fpr, tpr, _ = metrics.roc_curve(y_true == 2, D[:, 1])
    np.testing.assert_allclose(roc[1]["fpr"], fpr) and np.testing.assert_allclose(
        roc[1]["tpr"], tpr
    )
    assert len(by_file["curves"]["reliability"]) == 3

    dataset = client.post("/datasets", files={"file": ("held.csv", content)}).json()
    r = client.post(f"/models/{model['id']}/evaluate", data={"dataset_id": str(dataset["id"])})
    assert r.status_code == 200, r.text
    by_dataset = r.json()
    assert (by_dataset["source"], by_dataset["dataset_id"]) == ("dataset", dataset["id"])
    for key in ("accuracy", "balanced_accuracy", "log_loss", "brier", "ece"):
        assert by_dataset["metrics"][key] == pytest.approx(m[key], abs=1e-12), key
    assert by_dataset["metrics"]["confusion_matrix"] == m["confusion_matrix"]
    for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<?xml")):
        r = client.post(f"/models/{model['id']}/evaluate.{fmt}", files={"file": ("r.csv", content)})
        assert r.status_code == 200 and r.content.startswith(magic), r.text[:200]


def test_evaluate_refuses_what_it_cannot_measure(client, worker):
    X, y = blobs(n=60)
    model = trained_model(client, worker, to_csv(X, y))
    url = f"/models/{model['id']}/evaluate"
    assert_problem(client.post(url), 422, "dataset_id")
    unlabelled = b"x0,x1,x2\n1,2,3\n"
    assert_problem(client.post(url, files={"file": ("r.csv", unlabelled)}), 422, "label")
    assert_problem(client.post("/models/nobody/evaluate", data={"dataset_id": "1"}), 404)
    other = client.post("/datasets", files={"file": ("o.csv", to_csv(X[:, :2], y))}).json()
    assert_problem(client.post(url, data={"dataset_id": str(other["id"])}), 422, "dataset_id")


def test_explain_route_answers_as_predict_with_explain(client, worker):
    content, rows = _mixed()
    model = trained_model(client, worker, content)
    r = client.post(f"/models/{model['id']}/explain", json={"instances": rows[:5]})
    assert r.status_code == 200, r.text
    by_predict = _predict(client, model["id"], rows[:5], explain=True)
    got = [p["explanation"] for p in r.json()["predictions"]]
    assert got == [p["explanation"] for p in by_predict["predictions"]]
    assert r.json()["explanation"] == by_predict["explanation"]


def test_permutation_importance_equals_sklearns(client, worker, engine):
    from sklearn.inspection import permutation_importance

    X, y = _multi_data(n=120, seed=2)
    model = trained_model(client, worker, to_csv(X[:80], y[:80]))
    r = client.post(
        f"/models/{model['id']}/evaluate",
        files={"file": ("rows.csv", to_csv(X[80:], y[80:]))},
        data={"importance": "true"},
    )
    assert r.status_code == 200, r.text
    got = r.json()["importance"]
    loaded = _estimator(engine, model["id"])
    Xs = loaded.scaling.transform(X[80:])
    expected = permutation_importance(
        loaded.estimator, Xs, np.asarray(y[80:]), n_repeats=5, random_state=0
    )
    assert list(got["columns"]) == ["x0", "x1", "x2"]
    means = [got["columns"][c]["mean"] for c in ("x0", "x1", "x2")]
    np.testing.assert_allclose(means, expected.importances_mean, rtol=0, atol=1e-12)
    client.app.state.settings.max_explain_work = 10
    r = client.post(
        f"/models/{model['id']}/evaluate",
        files={"file": ("rows.csv", to_csv(X[80:], y[80:]))},
        data={"importance": "true"},
    )
    assert "MSVMAV_MAX_EXPLAIN_WORK" in assert_problem(r, 422, "importance")["detail"]


def test_importance_of_a_categorical_column_is_one_number(client, worker):
    content, rows = _mixed()
    model = trained_model(client, worker, content)
    r = client.post(
        f"/models/{model['id']}/evaluate",
        files={"file": ("rows.csv", content)},
        data={"importance": "true"},
    )
    assert r.status_code == 200, r.text
    columns = r.json()["importance"]["columns"]
    assert list(columns) == ["x0", "color", "x1"]
    assert columns["x0"]["mean"] > columns["x1"]["mean"]  # the label follows x0
