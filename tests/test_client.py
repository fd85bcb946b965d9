"""The Python client (``msvmav_client``) against a live ``msvmav serve`` with keys required (not
mocked): upload, datasets by reference and profiles, train with wait() and a progress callback,
jobs, models, registry, predict by reference (rows, records, DataFrame, file), explanations,
margins and their figures, export/import, batch jobs and their downloads, feedback, monitoring
reports and shadows, experiments, keys, health and metrics, and problem+json turned into typed
exceptions. ``import msvmav_client`` loads none of the service's dependencies.
tests/app/test_client_contract.py checks that the client has a method for every route."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from msvmav_client import (
    Client,
    Conflict,
    Forbidden,
    Job,
    JobFailed,
    NotFound,
    ProblemError,
    Unauthorized,
    ValidationFailed,
)
from tests.live_server import ROOT, LiveServer, live_server
from tests.wait_support import wait_until

ADMIN_KEY = "msv_client-admin-key-0123456789abcdefgh"
WDBC = ROOT / "examples" / "wdbc.arff"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The service with an admin key and a data root holding wdbc as Parquet."""
    tmp = tmp_path_factory.mktemp("client")
    (tmp / "data").mkdir()
    wdbc_frame().to_parquet(tmp / "data" / "wdbc.parquet", index=False)
    with live_server(
        tmp, MSVMAV_ADMIN_KEY=ADMIN_KEY, MSVMAV_DATA_ROOTS=str(tmp / "data")
    ) as server:
        yield server


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[Client]:
    with Client(server.url, api_key=ADMIN_KEY, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def trained(client: Client) -> dict:
    """wdbc uploaded and trained once, following the job with a progress callback."""
    dataset = client.upload(WDBC)
    seen: list[dict] = []
    job = client.train(
        dataset["id"], kernel="linear", alpha=16, beta=0.25, test_fraction=0.2, seed=0
    )
    info = job.wait(progress=seen.append, timeout=120, poll=0.1)
    assert info["status"] == "succeeded" and job.model_id == info["model_id"]
    assert seen and seen[-1]["status"] == "succeeded" and seen[-1]["progress"] == 1
    return {"dataset": dataset, "job": info, "model_id": info["model_id"]}


def wdbc_frame() -> pd.DataFrame:
    """wdbc's rows and labels read here, independently of the service's parser."""
    lines = WDBC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().lower() == "@data") + 1
    rows = [line.split(",") for line in lines[start:] if line.strip() and line[0] != "%"]
    frame = pd.DataFrame([[float(v) for v in r[:-1]] for r in rows])
    frame.columns = [f"V{j}" for j in range(1, 31)]
    frame["Class"] = [int(r[-1]) for r in rows]
    return frame


def test_import_loads_no_service_dependency():
    code = (
        "import sys, msvmav_client; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'sqlalchemy', 'starlette', 'app', 'solver', 'pydantic')); "
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_upload_train_and_read_back(client, trained):
    dataset = trained["dataset"]
    assert (dataset["n_rows"], dataset["n_features"], dataset["classes"]) == (569, 30, [1, 2])
    assert client.dataset(dataset["id"])["name"] == "wdbc.arff"
    assert dataset["id"] in [d["id"] for d in client.datasets()["items"]]
    model = client.model(trained["model_id"])
    assert model["algorithm"] == "msvmav" and model["holdout_accuracy"] > 0.9
    assert trained["job"]["id"] in [j["id"] for j in client.jobs()["items"]]
    assert trained["model_id"] in [m["id"] for m in client.models()["items"]]
    frame = wdbc_frame().head(50)
    uploaded = client.upload(frame, name="frame.csv")  # a DataFrame goes up as CSV
    assert (uploaded["n_rows"], uploaded["n_features"]) == (50, 30)  # last column: the label
    assert uploaded["classes"] == [1, 2]


def unnamed(answer: dict) -> list[dict]:
    """The predictions without their ids (each request's own: "{request_id}:{row}")."""
    return [{k: v for k, v in p.items() if k != "id"} for p in answer["predictions"]]


def test_predict_rows_records_frame_and_file_agree(client, trained, tmp_path):
    model_id = trained["model_id"]
    frame = wdbc_frame()
    features = frame.drop(columns="Class")
    rows = features.head(20).to_numpy().tolist()
    by_rows = client.predict(model_id, rows)
    by_records = client.predict(model_id, features.head(20).to_dict(orient="records"))
    by_frame = client.predict(model_id, features.head(20), labels=frame["Class"].head(20))
    for answer in (by_records, by_frame):
        assert unnamed(answer) == unnamed(by_rows)
    assert 0.8 <= by_frame["accuracy"] <= 1 and by_frame["margins"]["n"] == 20
    # a calibrated model labels each row by its most probable class (b5dbe53), not the
    # decision value's sign: the two disagree on borderline rows
    classes = by_rows["classes"]
    assert [p["label"] for p in by_rows["predictions"]] == [
        max(classes, key=lambda c: p["probabilities"][str(c)]) for p in by_rows["predictions"]
    ]
    path = tmp_path / "rows.csv"
    frame.head(20).to_csv(path, index=False)
    by_file = client.predict_file(model_id, path, label="Class")
    assert unnamed(by_file) == unnamed(by_rows)
    assert by_file["accuracy"] == by_frame["accuracy"]
    margins = client.margins(model_id, split="holdout")
    assert margins["n"] == 114 and margins["source"] == "holdout"


def test_registry_by_reference(client, trained):
    model_id = trained["model_id"]
    dataset = trained["dataset"]
    second = client.train(dataset["id"], kernel="linear", alpha=1, beta=1, test_fraction=0.2)
    second_id = second.wait(timeout=120, poll=0.1)["model_id"]
    assert client.register("wdbc", model_id)["version"] == 1  # creates the name
    assert client.register("wdbc", second_id)["version"] == 2
    client.set_alias("wdbc", "production", 1)
    rows = wdbc_frame().drop(columns="Class").head(5).to_numpy().tolist()
    by_id = unnamed(client.predict(model_id, rows))
    answer = client.predict("wdbc@production", rows)
    assert unnamed(answer) == by_id and (answer["model"], answer["version"]) == ("wdbc", 1)
    assert client.predict("wdbc", rows)["model_id"] == model_id  # production (not the newest)
    client.set_alias("wdbc", "production", 2)
    assert client.predict("wdbc@production", rows)["model_id"] == second_id
    client.rollback("wdbc", "production")
    assert client.registered_model("wdbc")["aliases"]["production"] == 1
    assert len(client.history("wdbc")["items"]) >= 3
    assert "wdbc" in [m["name"] for m in client.registered_models()["items"]]


def test_export_and_import_bundle(client, trained, tmp_path):
    model_id = trained["model_id"]
    path = tmp_path / "model.zip"
    bundle = client.export(model_id, path=path)
    assert path.read_bytes() == bundle and bundle[:2] == b"PK"
    imported = client.import_bundle(path)
    rows = wdbc_frame().drop(columns="Class").head(10).to_numpy().tolist()
    original = client.predict(model_id, rows)["predictions"]
    again = client.predict(imported["id"], rows)["predictions"]
    assert imported["id"] != model_id
    assert [p["label"] for p in again] == [p["label"] for p in original]
    np.testing.assert_allclose(
        [p["decision_value"] for p in again], [p["decision_value"] for p in original], atol=1e-12
    )


def test_problems_become_typed_exceptions(server, client, trained):
    with pytest.raises(NotFound) as missing:
        client.model(999999)
    assert missing.value.status == 404 and missing.value.detail == "model 999999 not found"
    with pytest.raises(ValidationFailed) as invalid:
        client.predict(trained["model_id"], [[1.0, 2.0]])
    error = invalid.value.errors[0]
    assert invalid.value.status == 422 and error["field"].startswith("instances")
    assert "30" in invalid.value.detail
    with pytest.raises(Conflict):
        Job(client, trained["job"]).cancel()  # finished: 409
    with pytest.raises(NotFound):
        client.predict("nobody@production", [[1.0] * 30])
    with Client(server.url) as anonymous, pytest.raises(Unauthorized) as unauthorized:
        anonymous.datasets()
    assert "Authorization: Bearer" in unauthorized.value.detail
    assert isinstance(unauthorized.value, ProblemError)


def test_forbidden_and_job_failures(server, client, trained):
    r = client.http.post("/keys", json={"name": "reader", "scope": "read"})
    assert r.status_code == 201, r.text
    with Client(server.url, api_key=r.json()["key"]) as reader:
        assert reader.predict(trained["model_id"], [[1.0] * 30])["n"] == 1
        with pytest.raises(Forbidden) as forbidden:
            reader.delete_model(trained["model_id"])
        assert forbidden.value.body["required_scope"] == "write"
    job = client.train(trained["dataset"]["id"], kernel="rbf", max_iter=100000)
    job.cancel()
    with pytest.raises(JobFailed) as failed:
        job.wait(timeout=60, poll=0.1)
    assert failed.value.job["status"] == "cancelled"


def test_readme_shows_the_client():
    text = (ROOT / "README.md").read_text()
    assert "from msvmav_client import Client" in text
    assert Path(ROOT / "docs" / "client.md").exists()


def eventually(check: Callable[[], dict | None], timeout: float = 30.0) -> dict:
    """Poll ``check`` until it returns an answer (the prediction log is written off the request
    path, a few tenths of a second after the answer)."""
    return wait_until(check, timeout=timeout, interval=0.1, message="no answer")


def features(n: int) -> list[list[float]]:
    return wdbc_frame().drop(columns="Class").head(n).to_numpy().tolist()


def test_dataset_by_reference_profile_and_delete(server, client, trained):
    uri = str(server.cwd.parent / "data" / "wdbc.parquet")
    referenced = client.register_reference(uri, name="wdbc-ref", label="Class")
    assert (referenced["n_rows"], referenced["n_features"]) == (569, 30)
    assert referenced["reference"]["uri"] == uri
    profile = client.profile(referenced["id"])
    assert (profile["dataset_id"], profile["rows_profiled"], profile["n_columns"]) == (
        referenced["id"], 569, 30)
    assert profile["label"]["classes"] == [1, 2]
    client.delete_dataset(referenced["id"])
    with pytest.raises(NotFound):
        client.dataset(referenced["id"])


def test_explain_and_margin_figures(client, trained):
    model_id = trained["model_id"]
    answer = client.explain(model_id, features(3), ids=["a", "b", "c"])
    assert [p["id"] for p in answer["predictions"]] == ["a", "b", "c"]
    for p in answer["predictions"]:
        e = p["explanation"]
        assert sum(e["contributions"].values()) == pytest.approx(
            p["decision_value"] - e["baseline_decision"], abs=1e-9)
    assert client.margins_figure(model_id)[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in client.margins_figure(model_id, format="svg", split="holdout")


def test_batch_job_result_and_errors(client, trained, tmp_path):
    frame = wdbc_frame().head(30).astype({"V1": object})
    frame.loc[4, "V1"] = "lots"  # one row that cannot be scored
    job = client.batch_predict(trained["model_id"], frame.to_csv(index=False).encode(),
                               passthrough=["Class"], on_error="skip", chunk_rows=10)
    info = job.wait(timeout=120, poll=0.1)
    assert (info["kind"], info["result"]["n_rows"], info["result"]["n_errors"]) == (
        "batch_predict", 29, 1)
    result = pd.read_csv(io.BytesIO(client.batch_result(job.id)))
    assert list(result["row"]) == [r for r in range(30) if r != 4]
    expected = client.predict(trained["model_id"], features(30))["predictions"]
    assert list(result["label"]) == [p["label"] for i, p in enumerate(expected) if i != 4]
    assert list(result["Class"]) == [c for i, c in enumerate(wdbc_frame()["Class"][:30]) if i != 4]
    path = tmp_path / "result.parquet"
    assert client.batch_result(job.id, format="parquet", path=path) is None
    assert list(pd.read_parquet(path)["row"]) == list(result["row"])
    errors = client.batch_errors(job.id).splitlines()
    assert errors[0] == "row,line,column,reason" and errors[1].startswith("4,6,V1,")
    with pytest.raises(NotFound):
        client.batch_result(999999, path=tmp_path / "missing.csv")
    assert not (tmp_path / "missing.csv").exists()


def test_feedback_and_monitoring_reports(client, trained):
    model_id = trained["model_id"]
    client.register("monitored", model_id)
    client.set_alias("monitored", "production", 1)
    ids = [f"m-{i}" for i in range(20)]
    labels = list(wdbc_frame()["Class"][:20])
    client.predict("monitored@production", features(20), ids=ids)

    def matched() -> dict | None:
        answer = client.feedback(model_id, ids, labels)
        return answer if answer["matched"] == 20 else None

    assert eventually(matched)["unknown_ids"] == []
    report = client.monitoring(model_id)
    assert report["model_id"] == model_id and report["labelled"]["n"] >= 20
    assert report["live"]["n"] >= 20 and report["reference"]["n"] > 0
    by_alias = client.monitoring("monitored@production", since="2000-01-01T00:00:00Z")
    assert by_alias["model_id"] == model_id and by_alias["since"].startswith("2000-01-01")
    assert client.monitoring("monitored/1")["model_id"] == model_id
    assert client.monitoring(model_id, figure="png")[:4] == b"\x89PNG"
    assert client.monitoring("monitored", figure="png")[:4] == b"\x89PNG"


def test_shadow_of_a_challenger(client, trained):
    first = trained["model_id"]
    second = client.train(trained["dataset"]["id"], kernel="linear", alpha=1, beta=1, seed=0)
    second_id = second.wait(timeout=120, poll=0.1)["model_id"]
    client.create_registered_model("shadowed", description="a shadow", tags={"team": "t"})
    client.register("shadowed", first)
    client.register("shadowed", second_id)
    client.set_alias("shadowed", "production", 1)
    client.set_alias("shadowed", "challenger", 2)
    started = client.start_shadow("shadowed", "challenger")
    assert (started["alias"], started["running"], started["n"]) == ("challenger", True, 0)
    client.predict("shadowed@production", features(10))
    report = eventually(lambda: (r := client.shadow("shadowed"))["n"] >= 10 and r or None)
    assert report["production"]["model_ids"] == [first]
    assert report["challenger"]["model_ids"] == [second_id]
    client.stop_shadow("shadowed")
    assert client.shadow("shadowed")["running"] is False


def test_registered_model_names_and_versions(client, trained):
    created = client.create_registered_model("named", description="first", tags={"a": "b"})
    assert (created["name"], created["description"], created["tags"]) == ("named", "first",
                                                                          {"a": "b"})
    updated = client.update_registered_model("named", description="second")
    assert (updated["description"], updated["tags"]) == ("second", {"a": "b"})
    assert client.register("named", trained["model_id"])["version"] == 1
    client.set_alias("named", "staging", 1)
    client.delete_alias("named", "staging")
    client.delete_version("named", 1)
    assert client.registered_model("named")["versions"] == []
    client.delete_registered_model("named")
    with pytest.raises(NotFound):
        client.registered_model("named")


def test_experiment_tables_and_figures(client, trained):
    job = client.start_experiment(
        [trained["dataset"]["id"]], algorithms=["msvmav"], splits=1, cv=2,
        grid={"msvmav": {"alpha": [16], "beta": [0.25]}},
    )
    job.wait(timeout=300, poll=0.2)
    experiment = client.experiment(job.id)
    assert experiment["status"] == "succeeded" and len(experiment["results"]) == 1
    assert job.id in [e["id"] for e in client.experiments()["items"]]
    assert "msvmav" in client.experiment_table(job.id).lower()
    assert client.experiment_table(job.id, format="csv").count("\n") >= 1
    assert client.experiment_margins(job.id)[:4] == b"\x89PNG"
    assert b"<svg" in client.experiment_margins(job.id, format="svg")


def test_keys_health_and_metrics(server, client):
    created = client.create_key("reader", "read", expires_at="2999-01-01")
    assert created["key"].startswith("msv_") and created["scope"] == "read"
    assert client.key(created["id"])["name"] == "reader"
    assert created["id"] in [k["id"] for k in client.keys()["items"]]
    with Client(server.url, api_key=created["key"]) as reader:
        assert reader.ready()["status"] == "ok"
        client.revoke_key(created["id"])
        assert client.key(created["id"])["revoked_at"] is not None
        eventually(lambda: _refused(reader))
    assert client.live()["status"] == "ok"
    assert "msvmav_http_requests_total" in client.metrics()


def _refused(reader: Client) -> dict | None:
    """The revoked key is refused once the service rechecks it (within its recheck window)."""
    try:
        reader.datasets()
    except Unauthorized as exc:
        return {"status": exc.status}
    return None


def test_leaderboard_by_dataset_and_by_reference(client, trained):
    """Two wdbc models on one hold-out, compared by the client; the metrics against sklearn on
    the hold-out rows scored through the client's predict."""
    from sklearn import metrics

    dataset_id, first = trained["dataset"]["id"], trained["model_id"]
    job = client.train(dataset_id, algorithm="svm", test_fraction=0.2, seed=0)
    second = job.wait(timeout=120, poll=0.1)["model_id"]
    board = client.leaderboard(dataset_id=dataset_id, metric="expected_cost", cost_fp=5,
                               cost_fn=1)
    assert board["comparable"] and board["n_rows"] == 114
    frame = wdbc_frame()
    rows = client.model(first)["holdout"]["rows"]
    features, y = frame.drop(columns="Class").iloc[rows], frame["Class"].iloc[rows].to_numpy()
    by_id = {e["model_id"]: e for e in board["models"]}
    for model_id in (first, second):
        answer = client.predict(model_id, features)
        labels = np.array([p["label"] for p in answer["predictions"]])
        D = np.array([p["decision_value"] for p in answer["predictions"]])
        entry = by_id[model_id]
        assert entry["accuracy"] == pytest.approx(metrics.accuracy_score(y, labels))
        assert entry["roc_auc"] == pytest.approx(metrics.roc_auc_score(y == 2, D))
        fp, fn = np.sum((labels == 2) & (y == 1)), np.sum((labels == 1) & (y == 2))
        assert entry["expected_cost"] == pytest.approx((5 * fp + fn) / len(y))
    assert board["best"] == [board["models"][0]["model_id"]] or board["models"][0]["best"]
    matrix = client.leaderboard([first, second], cost_matrix=[[0, 5], [1, 0]],
                                metric="expected_cost")
    # the same two models in the same order (the dataset's board may hold other tests' models)
    assert [(e["model_id"], e["expected_cost"]) for e in matrix["models"]] == [
        (e["model_id"], e["expected_cost"]) for e in board["models"]
        if e["model_id"] in (first, second)]
    with pytest.raises(ValidationFailed) as caught:
        client.leaderboard([first], metric="f1")
    assert "metric" in str(caught.value)


def test_evaluate_probabilities_threshold_and_job(client, trained, tmp_path):
    """The client's evaluate (hold-out rows by default, all rows, a file, a figure),
    predict_proba, set_threshold (not stored: the module's model keeps argmax) and job, on the
    live server; the metrics against sklearn on the labels the client's predict serves."""
    from sklearn import metrics

    model_id, dataset_id = trained["model_id"], trained["dataset"]["id"]
    frame = wdbc_frame()
    X, y = frame.drop(columns="Class"), frame["Class"].to_numpy()
    detail = client.model(model_id)
    holdout = detail["holdout"]["rows"]
    answer = client.evaluate(model_id, dataset_id=dataset_id)
    assert (answer["rows"], answer["row_indices"], answer["n"]) == ("holdout", holdout, 114)
    served = [p["label"] for p in client.predict(model_id, X.iloc[holdout])["predictions"]]
    assert answer["metrics"]["accuracy"] == pytest.approx(
        metrics.accuracy_score(y[holdout], served))
    assert {"roc", "pr", "reliability"} <= set(answer["curves"])
    every = client.evaluate(model_id, dataset_id=dataset_id, rows="all")
    assert (every["rows"], every["n"]) == ("all", 569)
    path = tmp_path / "labelled.csv"
    frame.head(40).to_csv(path, index=False)
    by_file = client.evaluate(model_id, data=path, label="Class")
    served = [p["label"] for p in client.predict(model_id, X.head(40))["predictions"]]
    assert (by_file["source"], by_file["n"]) == ("file", 40)
    assert by_file["metrics"]["accuracy"] == pytest.approx(metrics.accuracy_score(y[:40], served))
    assert client.evaluate(model_id, dataset_id=dataset_id, figure="png")[:4] == b"\x89PNG"
    proba = np.array(client.predict_proba(model_id, X.head(5)))
    classes = client.predict(model_id, X.head(5))["classes"]
    expected = [[p["probabilities"][str(c)] for c in classes]
                for p in client.predict(model_id, X.head(5))["predictions"]]
    np.testing.assert_allclose(proba, expected, atol=0)
    np.testing.assert_allclose(proba.sum(axis=1), 1, atol=1e-9)
    rule = client.set_threshold(model_id, cost_fp=1, cost_fn=5, store=False)
    assert rule["stored_on"] is None and rule["model_id"] == model_id
    assert 0 < rule["threshold"] < 1
    assert b"<svg" in client.set_threshold(model_id, cost_fp=1, cost_fn=5, figure="svg")
    assert client.model(model_id)["holdout_rule"] == detail["holdout_rule"]  # nothing stored
    job = client.job(trained["job"]["id"])
    assert (job["status"], job["model_id"]) == ("succeeded", model_id)
