"""The model registry over HTTP: registered models, versions, aliases, rollback, history;
predicting by reference; the stored models' 409 and filters; unknown query parameters (SQLite,
and PostgreSQL when TEST_DATABASE_URL is set)."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from fastapi.routing import iter_route_contexts
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.datasets.orm import Dataset
from app.main import create_app
from app.registry import service as registry
from app.registry.orm import AliasMove, ModelVersion
from tests.app.support import (
    assert_problem,
    blobs,
    run_jobs,
    running_job,
    submit,
    to_csv,
    trained_model,
    upload,
    wait_for,
)

X, Y = blobs()
ROWS = X[:6].tolist()


def _register(client, name: str, model_id: int) -> int:
    r = client.post(f"/registered-models/{name}/versions", json={"model_id": model_id})
    assert r.status_code == 201, r.text
    return r.json()["version"]


@pytest.fixture
def credit(client, worker) -> list[int]:
    """Registered model 'credit' with versions 1, 2 (two different stored models, ids
    returned in version order)."""
    assert client.post("/registered-models", json={"name": "credit"}).status_code == 201
    ids = [trained_model(client, worker)["id"], trained_model(client, worker, alpha=0.01)["id"]]
    assert [_register(client, "credit", i) for i in ids] == [1, 2]
    return ids


def _decisions(client, **target) -> np.ndarray:
    r = client.post("/predict", json={**target, "instances": ROWS})
    assert r.status_code == 200, r.text
    return np.array([p["decision_value"] for p in r.json()["predictions"]])


# --- registered models --------------------------------------------------------------------------


def test_registered_model_create_get_list_update_delete(client):
    body = {"name": "credit", "description": "scoring", "tags": {"team": "risk"}}
    r = client.post("/registered-models", json=body)
    assert r.status_code == 201 and r.headers["location"] == "/registered-models/credit"
    assert r.json() | body == r.json() and r.json()["versions"] == []
    assert r.json()["latest_version"] == 0 and r.json()["aliases"] == {}
    assert_problem(client.post("/registered-models", json={"name": "credit"}), 409)
    assert client.post("/registered-models", json={"name": "b.2_x-y"}).status_code == 201
    page = client.get("/registered-models", params={"limit": 1}).json()
    assert [m["name"] for m in page["items"]] == ["b.2_x-y"] and page["next_cursor"]
    rest = client.get("/registered-models", params={"cursor": page["next_cursor"]}).json()
    assert [m["name"] for m in rest["items"]] == ["credit"] and rest["next_cursor"] is None
    r = client.patch("/registered-models/credit", json={"tags": {"team": "ops"}})
    assert r.status_code == 200 and r.json()["tags"] == {"team": "ops"}
    assert r.json()["description"] == "scoring"  # not given: kept
    r = client.patch("/registered-models/credit", json={"description": ""})
    assert r.json()["description"] == "" and r.json()["tags"] == {"team": "ops"}
    assert client.get("/registered-models/credit").json()["tags"] == {"team": "ops"}
    assert client.delete("/registered-models/credit").status_code == 204
    body = assert_problem(client.get("/registered-models/credit"), 404)
    assert body["detail"] == "registered model 'credit' not found"
    for method in ("GET", "PATCH", "DELETE"):
        r = client.request(method, "/registered-models/nope", json={})
        assert assert_problem(r, 404)["detail"] == "registered model 'nope' not found"


@pytest.mark.parametrize(
    "name", ["", "-x", ".x", "a b", "a/b", "a@b", "x" * 101, "123", "caf\u00e9", "a\nb"]
)
def test_registered_model_names_are_checked(client, name):
    assert_problem(client.post("/registered-models", json={"name": name}), 422, "name")


def test_registered_model_bodies_are_checked(client):
    assert_problem(client.post("/registered-models", json={"name": "a", "x": 1}), 422, "x")
    assert_problem(client.post("/registered-models", json={"name": "a", "tags": {"k": 1}}), 422)
    client.post("/registered-models", json={"name": "a"})
    assert_problem(client.patch("/registered-models/a", json={"tags": []}), 422, "tags")


# --- versions -----------------------------------------------------------------------------------


def test_versions_list_their_models_and_numbers_are_never_reused(client, worker, credit):
    detail = client.get("/registered-models/credit").json()
    assert [(v["version"], v["model_id"]) for v in detail["versions"]] == [
        (2, credit[1]),
        (1, credit[0]),
    ]
    for v in detail["versions"]:
        model = client.get(f"/models/{v['model_id']}").json()
        assert (v["algorithm"], v["holdout_accuracy"]) == (
            model["algorithm"],
            model["holdout_accuracy"],
        )
    assert client.delete("/registered-models/credit/versions/2").status_code == 204
    assert _register(client, "credit", credit[1]) == 3  # 2 is not given again
    assert_problem(client.delete("/registered-models/credit/versions/2"), 404)
    assert_problem(client.delete("/registered-models/credit/versions/99999999999"), 404)
    body = assert_problem(
        client.post("/registered-models/credit/versions", json={"model_id": 999}), 404, "model_id"
    )
    assert body["detail"] == "model_id: model 999 not found"
    r = client.post("/registered-models/nope/versions", json={"model_id": credit[0]})
    assert_problem(r, 404)
    assert_problem(client.post("/registered-models/credit/versions", json={"model_id": "1"}), 422)


def test_a_version_and_its_stored_model_are_deleted_in_order(client, credit):
    client.put("/registered-models/credit/aliases/production", json={"version": 1})
    body = assert_problem(client.delete(f"/models/{credit[0]}"), 409)
    assert "version 1 of registered model 'credit'" in body["detail"]
    body = assert_problem(client.delete("/registered-models/credit/versions/1"), 409)
    assert "'production'" in body["detail"]
    body = assert_problem(client.delete("/registered-models/credit"), 409)
    assert "'production' -> version 1" in body["detail"]
    client.put("/registered-models/credit/aliases/production", json={"version": 2})
    assert client.delete("/registered-models/credit/versions/1").status_code == 204
    assert client.delete(f"/models/{credit[0]}").status_code == 204
    assert client.delete("/registered-models/credit/aliases/production").status_code == 204
    assert client.delete("/registered-models/credit").status_code == 204
    assert client.get(f"/models/{credit[1]}").status_code == 200  # stored models stay
    assert client.delete(f"/models/{credit[1]}").status_code == 204


# --- aliases, rollback, history -----------------------------------------------------------------


def test_alias_moves_rollback_and_history(client, credit):
    put = lambda v: client.put("/registered-models/credit/aliases/production", json={"version": v})  # noqa: E731
    r = put(1)
    assert r.status_code == 200
    assert r.json() == {
        "name": "credit",
        "alias": "production",
        "version": 1,
        "model_id": credit[0],
        "previous_version": None,
        "canary": None,
    }
    assert_problem(client.post("/registered-models/credit/aliases/production/rollback"), 409)
    assert put(2).json()["previous_version"] == 1
    assert put(2).json()["previous_version"] == 2  # no move: not in the history
    r = client.post("/registered-models/credit/aliases/production/rollback")
    assert r.status_code == 200 and (r.json()["version"], r.json()["previous_version"]) == (1, 2)
    assert client.get("/registered-models/credit").json()["aliases"] == {"production": 1}
    # a second rollback goes further back, never forward: here the alias's first move created it
    body = assert_problem(client.post("/registered-models/credit/aliases/production/rollback"), 409)
    assert "no earlier version" in body["detail"] and "never set" not in body["detail"]
    assert client.delete("/registered-models/credit/aliases/production").status_code == 204
    assert_problem(client.delete("/registered-models/credit/aliases/production"), 404)
    r = client.post("/registered-models/credit/aliases/production/rollback")  # comes back
    assert r.json()["version"] == 1 and r.json()["previous_version"] is None
    history = client.get("/registered-models/credit/history").json()["items"]
    assert [(h["action"], h["from_version"], h["to_version"]) for h in history] == [
        ("rollback", None, 1),
        ("delete", 1, None),
        ("rollback", 2, 1),
        ("set", 1, 2),
        ("set", None, 1),
    ]
    assert all(h["alias"] == "production" and h["actor"] is None for h in history)
    assert [h["id"] for h in history] == sorted((h["id"] for h in history), reverse=True)
    page = client.get("/registered-models/credit/history", params={"limit": 4}).json()
    more = client.get("/registered-models/credit/history", params={"cursor": page["next_cursor"]})
    assert page["items"] + more.json()["items"] == history
    assert_problem(client.get("/registered-models/nope/history"), 404)


def test_successive_rollbacks_walk_back_through_the_history(client, credit):
    """1 -> 2 -> 3, a rollback -> 2, another -> 1 (the issue: the second went forward to 2
    again); a move made after rollbacks is the first one undone."""
    assert _register(client, "credit", credit[0]) == 3
    alias = "/registered-models/credit/aliases/production"
    for v in (1, 2, 3):
        assert client.put(alias, json={"version": v}).status_code == 200
    back = lambda: client.post(alias + "/rollback")  # noqa: E731
    moves = []
    for _ in range(2):
        r = back()
        assert r.status_code == 200, r.text
        moves.append((r.json()["previous_version"], r.json()["version"]))
    assert moves == [(3, 2), (2, 1)]
    assert client.get("/registered-models/credit").json()["aliases"] == {"production": 1}
    assert_problem(back(), 409)  # the move to 1 created the alias: nothing before it
    assert client.put(alias, json={"version": 3}).json()["previous_version"] == 1
    assert (back().json()["version"], back().status_code) == (1, 409)
    # a removal is a move too: undone first, then the moves before it
    assert client.put(alias, json={"version": 2}).status_code == 200
    assert client.delete(alias).status_code == 204
    assert [back().json()["version"] for _ in range(2)] == [2, 1]
    model = client.post("/predict", json={"model": "credit@production", "instances": ROWS})
    assert model.json()["model_id"] == credit[0] and model.json()["version"] == 1


def test_alias_errors(client, credit):
    r = client.put("/registered-models/credit/aliases/production", json={"version": 7})
    assert assert_problem(r, 404, "version")["detail"].endswith("has no version 7")
    r = client.put("/registered-models/credit/aliases/pro duction", json={"version": 1})
    assert_problem(r, 422, "alias")
    assert_problem(client.put("/registered-models/credit/aliases/x", json={"version": 0}), 422)
    assert_problem(client.put("/registered-models/credit/aliases/x", json={}), 422, "version")
    assert_problem(client.put("/registered-models/nope/aliases/x", json={"version": 1}), 404)
    assert_problem(client.delete("/registered-models/nope/aliases/x"), 404)
    assert_problem(client.post("/registered-models/nope/aliases/x/rollback"), 404)
    body = assert_problem(client.post("/registered-models/credit/aliases/never/rollback"), 409)
    assert "never set" in body["detail"]


def test_rollback_to_a_deleted_version_is_a_conflict(client, credit):
    client.put("/registered-models/credit/aliases/staging", json={"version": 1})
    client.put("/registered-models/credit/aliases/staging", json={"version": 2})
    assert client.delete("/registered-models/credit/versions/1").status_code == 204
    body = assert_problem(client.post("/registered-models/credit/aliases/staging/rollback"), 409)
    assert "version 1" in body["detail"] and "deleted" in body["detail"]


def test_history_names_the_key_that_moved_the_alias(settings, engine, credit):
    from tests.app.auth_support import bearer, make_key

    keyed = settings.model_copy(update={"admin_key": SecretStr("admin-" + "k" * 40)})
    from fastapi.testclient import TestClient

    key = make_key(engine, "write", name="deploy-bot")
    with TestClient(create_app(keyed)) as c:
        r = c.put(
            "/registered-models/credit/aliases/production", json={"version": 1}, headers=bearer(key)
        )
        assert r.status_code == 200, r.text
        history = c.get("/registered-models/credit/history", headers=bearer(key)).json()
    assert history["items"][0]["actor"] == "deploy-bot"


def test_concurrent_moves_of_one_alias_lose_no_entry(engine, credit):
    """Threads move one alias at once: every real move is in the history, each entry leaves
    the version the previous one set, and the alias ends where the last entry says."""
    moved = []
    errors = []

    def mover(k: int) -> None:
        try:
            for i in range(8):
                with Session(engine) as session:
                    version = 1 + (k + i) % 2
                    _, before = registry.set_alias(session, "credit", "live", version, f"t{k}")
                    if before != version:
                        moved.append((k, i))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=mover, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    with Session(engine) as session:
        moves = list(session.scalars(select(AliasMove).order_by(AliasMove.id)))
        final = registry.aliases_of(session, registry.get_or_raise(session, "credit"))["live"]
    assert len(moves) == len(moved) >= 2
    assert moves[0].from_version is None
    for earlier, later in zip(moves, moves[1:], strict=False):
        assert later.from_version == earlier.to_version != later.to_version
    assert final == moves[-1].to_version


# --- predicting by reference --------------------------------------------------------------------


def test_predict_by_alias_version_and_name(client, credit):
    by_id = [_decisions(client, model_id=i) for i in credit]
    assert not np.allclose(by_id[0], by_id[1])
    client.put("/registered-models/credit/aliases/production", json={"version": 1})
    r = client.post("/predict", json={"model": "credit@production", "instances": ROWS})
    body = r.json()
    assert (body["model_id"], body["model"], body["version"], body["alias"]) == (
        credit[0],
        "credit",
        1,
        "production",
    )
    np.testing.assert_array_equal(_decisions(client, model="credit@production"), by_id[0])
    np.testing.assert_array_equal(_decisions(client, model="credit/2"), by_id[1])
    # a bare name: the production version while it is set (else the newest)
    np.testing.assert_array_equal(_decisions(client, model="credit"), by_id[0])
    # a move is seen by the next request
    client.put("/registered-models/credit/aliases/production", json={"version": 2})
    np.testing.assert_array_equal(_decisions(client, model="credit@production"), by_id[1])
    client.post("/registered-models/credit/aliases/production/rollback")
    np.testing.assert_array_equal(_decisions(client, model="credit@production"), by_id[0])
    r = client.post("/predict", json={"model_id": credit[0], "instances": ROWS})
    assert (r.json()["model"], r.json()["version"], r.json()["alias"]) == (None, None, None)


def test_predict_file_by_reference(client, credit):
    client.headers["X-Request-ID"] = "same"  # the same default ids in both answers
    client.put("/registered-models/credit/aliases/production", json={"version": 2})
    content = to_csv(X[:10], Y[:10])
    by_ref = client.post(
        "/predict/file",
        files={"file": ("x.csv", content)},
        data={"model": "credit@production", "label": "y"},
    )
    by_id = client.post(
        "/predict/file",
        files={"file": ("x.csv", content)},
        data={"model_id": str(credit[1]), "label": "y"},
    )
    assert by_ref.status_code == 200, by_ref.text
    assert by_ref.json()["predictions"] == by_id.json()["predictions"]
    assert (by_ref.json()["model_id"], by_ref.json()["version"]) == (credit[1], 2)
    r = client.post(
        "/predict/file", files={"file": ("x.csv", content)}, data={"model": "credit@nope"}
    )
    assert assert_problem(r, 404)["detail"] == "registered model 'credit' has no alias 'nope'"
    r = client.post(
        "/predict/file",
        files={"file": ("x.csv", content)},
        data={"model": "credit", "model_id": "1"},
    )
    assert_problem(r, 422, "model")
    assert_problem(client.post("/predict/file", files={"file": ("x.csv", content)}), 422, "model")


@pytest.mark.parametrize(
    ("model", "detail"),
    [
        ("credit@production", "registered model 'credit' has no alias 'production'"),
        ("credit/9", "registered model 'credit' has no version 9"),
        ("nope", "registered model 'nope' not found"),
        ("nope@production", "registered model 'nope' not found"),
        ("999999", "model 999999 not found"),
    ],
)
def test_predict_by_an_unknown_reference_is_a_404_naming_it(client, credit, model, detail):
    r = client.post("/predict", json={"model": model, "instances": ROWS})
    assert assert_problem(r, 404)["detail"] == detail


def test_predict_needs_exactly_one_model(client, credit):
    assert_problem(client.post("/predict", json={"instances": ROWS}), 422, "model")
    r = client.post("/predict", json={"model": "credit", "model_id": credit[0], "instances": ROWS})
    assert_problem(r, 422, "model")
    assert_problem(
        client.post("/predict", json={"model": "cr edit", "instances": ROWS}), 422, "model"
    )
    assert_problem(client.post("/predict", json={"model": 3, "instances": ROWS}), 422, "model")


# --- stored models: filters; unknown query parameters -------------------------------------------


def test_models_list_filters(client, worker, credit):
    other = trained_model(client, worker, algorithm="svm")
    ids = lambda **q: [m["id"] for m in client.get("/models", params=q).json()["items"]]  # noqa: E731
    assert set(ids()) == {*credit, other["id"]}
    assert ids(algorithm="svm") == [other["id"]]
    assert set(ids(algorithm="msvmav")) == set(credit)
    assert ids(dataset_id=other["dataset_id"]) == [other["id"]]
    assert ids(registered_model="credit") == sorted(credit, reverse=True)
    assert ids(registered_model="credit", algorithm="svm") == []
    assert_problem(
        client.get("/models", params={"registered_model": "nope"}), 404, "registered_model"
    )
    assert_problem(client.get("/models", params={"algorithm": "forest"}), 422, "algorithm")


def _get_routes(app) -> list[str]:
    """Every GET route of the API (the documentation pages aside)."""
    return [
        r.path
        for r in iter_route_contexts(app.routes)
        if "GET" in (r.methods or ()) and r.include_in_schema
    ]


def test_every_get_route_refuses_an_unknown_query_parameter(client, credit):
    paths = _get_routes(client.app)
    assert {
        "/models",
        "/registered-models",
        "/registered-models/{name}/history",
        "/jobs",
        "/datasets",
        "/livez",
    } <= set(paths)
    for path in paths:
        url = re.sub(r"\{(\w+)\}", lambda m: "credit" if m[1] == "name" else "1", path)
        r = client.get(url, params={"bogus": "1"})
        body = assert_problem(r, 422, "bogus")
        assert "unknown query parameter" in body["detail"], (path, body)
    # the routes' own parameters still pass
    assert client.get("/models", params={"limit": 1, "dataset_id": 1}).status_code == 200
    r = client.get("/models", params={"dataset": 5})  # the typo
    assert "dataset_id" in assert_problem(r, 422, "dataset")["detail"]


# --- register_as --------------------------------------------------------------------------------


def _dataset(client) -> int:
    return upload(client, to_csv(X, Y))["id"]


def test_train_register_as_adds_the_next_version(client, worker):
    ds = _dataset(client)
    first = submit(client, ds, max_iter=20, register_as="wdbc")
    second = submit(client, ds, max_iter=20, register_as="wdbc")
    assert run_jobs(worker) == ["succeeded", "succeeded"]
    jobs = [client.get(f"/jobs/{j['id']}").json() for j in (first, second)]
    assert [j["result"]["registered_as"] for j in jobs] == [
        {"name": "wdbc", "version": 1},
        {"name": "wdbc", "version": 2},
    ]
    detail = client.get("/registered-models/wdbc").json()  # created on first use
    assert [(v["version"], v["model_id"]) for v in detail["versions"]] == [
        (2, jobs[1]["model_id"]),
        (1, jobs[0]["model_id"]),
    ]
    assert_problem(
        client.post("/train", json={"dataset_id": ds, "register_as": "a b"}), 422, "register_as"
    )


def _versions(engine) -> list[ModelVersion]:
    with Session(engine) as session:
        return list(session.scalars(select(ModelVersion)))


def test_a_failed_train_job_registers_nothing(client, worker, engine):
    ds = _dataset(client)
    submit(client, ds, max_iter=20, register_as="wdbc")
    with Session(engine) as session:  # the dataset goes away under the queued job
        session.delete(session.get(Dataset, ds))
        session.commit()
    assert run_jobs(worker) == ["failed"]
    assert _versions(engine) == []


def test_a_cancelled_train_job_registers_nothing(client, worker, engine):
    ds = _dataset(client)
    submit(client, ds, max_iter=1_000_000, tol=0.0, register_as="wdbc")  # runs until cancelled
    client.post("/registered-models", json={"name": "wdbc"})
    with running_job(engine, worker) as (job_id, statuses):
        wait_for(lambda: client.get(f"/jobs/{job_id}").json()["status"] == "running")
        client.post(f"/jobs/{job_id}/cancel")
    assert statuses == ["cancelled"], statuses
    assert client.get(f"/jobs/{job_id}").json()["model_id"] is None
    assert _versions(engine) == []
    assert client.get("/registered-models/wdbc").json()["latest_version"] == 0


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.usefixtures("cli_env")
def test_cli_register_alias_rollback_history(settings, client, worker, capsys, monkeypatch):
    from app.cli import main as cli

    monkeypatch.setenv("USER", "ops")
    monkeypatch.setenv("LOGNAME", "ops")
    ids = [trained_model(client, worker)["id"], trained_model(client, worker, alpha=0.01)["id"]]
    base = ["--database-url", settings.database_url, "models"]

    def run(*args: str) -> tuple[int, str, str]:
        status = cli.main([*base, *args])
        out, err = capsys.readouterr()
        return status, out.strip(), err.strip()

    assert run("register", "credit", str(ids[0]))[:2] == (0, f"credit version 1 = model {ids[0]}")
    assert run("register", "credit", str(ids[1]))[1] == f"credit version 2 = model {ids[1]}"
    assert run("alias", "credit", "production", "1")[1] == "credit@production: - -> 1"
    assert run("alias", "credit", "production", "2")[1] == "credit@production: 1 -> 2"
    assert run("rollback", "credit", "production")[1] == "credit@production: 2 -> 1"
    status, out, _ = run("history", "credit")
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows[0] == ["moved_at", "alias", "action", "from", "to", "actor"]
    assert [r[1:] for r in rows[1:]] == [
        ["production", "rollback", "2", "1", "cli:ops"],
        ["production", "set", "1", "2", "cli:ops"],
        ["production", "set", "-", "1", "cli:ops"],
    ]
    # the API sees what the command did
    body = client.post("/predict", json={"model": "credit@production", "instances": ROWS}).json()
    assert (body["model_id"], body["version"]) == (ids[0], 1)
    status, _, err = run("rollback", "credit", "nope")
    assert status == 1 and err.endswith(
        "msvmav models rollback: alias 'nope' of registered model 'credit' has no earlier "
        "version to go back to (it was never set)"
    )
    status, _, err = run("register", "credit", "999999")
    assert status == 1 and "model 999999 not found" in err
    status, _, err = run("alias", "credit", "production", "9")
    assert status == 1 and "has no version 9" in err
    assert run("history", "nope")[2].endswith(
        "msvmav models history: registered model 'nope' not found"
    )
    assert run("alias", "credit", "production", "--delete")[1] == "credit@production removed"


def test_concurrent_first_registrations_of_a_new_name_make_versions_1_and_2(engine, credit):
    """Two train jobs registering a new name at once: one creates it, both get a version."""
    barrier = threading.Barrier(2)
    versions: list[int] = []
    errors: list[Exception] = []

    def register(model_id: int) -> None:
        try:
            with Session(engine) as session:
                barrier.wait(10)
                version = registry.add_version(session, "fresh", model_id, create_missing=True)
                session.commit()
                versions.append(version.version)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(i,)) for i in credit]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sorted(versions) == [1, 2]


def test_list_and_history_check_their_paging_parameters(client, credit):
    for url in ("/registered-models", "/registered-models/credit/history"):
        assert_problem(client.get(url, params={"limit": 1000}), 422, "limit")
        assert_problem(client.get(url, params={"cursor": "nope"}), 422, "cursor")


def test_a_large_body_predicts_by_alias_like_by_id(client, credit):
    """Above 1 MB the rows stay bytes until the model is known (app.predict.numeric_rows):
    the reference is resolved first, then they are read for that model."""
    client.headers["X-Request-ID"] = "same"  # the same default ids in both answers
    client.put("/registered-models/credit/aliases/production", json={"version": 2})
    rows = np.repeat(X, 300, axis=0).tolist()  # 24,000 rows, about 1.4 MB
    by_alias = client.post("/predict", json={"model": "credit@production", "instances": rows})
    by_id = client.post("/predict", json={"model_id": credit[1], "instances": rows})
    assert len(by_alias.request.content) > 1024 * 1024
    assert by_alias.status_code == 200, by_alias.text
    assert by_alias.json()["predictions"] == by_id.json()["predictions"]
    assert (by_alias.json()["model_id"], by_alias.json()["version"]) == (credit[1], 2)
