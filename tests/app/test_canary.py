"""Canary traffic (issue 48): an alias splits its requests between two versions by percentage,
sticky by a request key, at every door; each answer and each logged row says which version
answered; the monitoring report judges each arm on its own rows; the history records the
canary's start, change and end (SQLite, and PostgreSQL when TEST_DATABASE_URL is set)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import text

from app.main import create_app
from app.monitoring import log as prediction_log
from app.monitoring.arms import arm_records
from app.registry.canary import bucket, in_canary
from app.serving import refresh
from tests.app.auth_support import ADMIN, bearer, make_key
from tests.app.serving_support import Reads
from tests.app.support import assert_problem, blobs, run_jobs, to_csv, trained_model

# the registry's joins and the log's grouping differ between the backends: both run
pytestmark = pytest.mark.postgres

X, Y = blobs(n=4, seed=3)
ROWS = X.tolist()
ALIAS = "/registered-models/credit/aliases/production"
KEY = "X-Msvmav-Route-Key"


# --- the split itself (no app) -----------------------------------------------------------------


def test_the_split_follows_the_percentage_for_a_fixed_set_of_keys():
    """10,000 fixed keys at 10 %: the canary's count within 4 binomial standard deviations
    of 1,000 (a hash that is not uniform, or a wrong comparison, lands far outside)."""
    n, p = 10_000, 0.10
    hits = sum(in_canary("credit", "production", 100 * p, f"customer-{i}") for i in range(n))
    sd = math.sqrt(n * p * (1 - p))
    assert abs(hits - n * p) <= 4 * sd, hits


def test_a_key_keeps_its_arm_and_raising_the_percentage_only_adds_keys():
    keys = [f"k{i}" for i in range(2_000)]
    at10 = {k for k in keys if in_canary("credit", "production", 10, k)}
    assert at10 == {k for k in keys if in_canary("credit", "production", 10, k)}  # sticky
    at20 = {k for k in keys if in_canary("credit", "production", 20, k)}
    assert at10 < at20  # a key in the canary at 10 % stays there at 20 %
    # another alias (or model) splits its keys independently of this one
    other = {k for k in keys if in_canary("credit", "staging", 10, k)}
    assert other != at10
    assert all(0.0 <= bucket("credit", "production", k) < 100.0 for k in keys[:50])


# --- the service -------------------------------------------------------------------------------


@pytest.fixture
def credit(client, worker) -> list[int]:
    """Registered model 'credit': versions 1 and 2 (two stored models), production -> 1 with
    version 2 as its canary at 30 %."""
    assert client.post("/registered-models", json={"name": "credit"}).status_code == 201
    ids = [trained_model(client, worker)["id"], trained_model(client, worker, alpha=0.01)["id"]]
    for model_id in ids:
        r = client.post("/registered-models/credit/versions", json={"model_id": model_id})
        assert r.status_code == 201, r.text
    r = client.put(ALIAS, json={"version": 1, "canary": {"version": 2, "percent": 30}})
    assert r.status_code == 200, r.text
    assert r.json()["canary"] == {"version": 2, "percent": 30.0, "model_id": ids[1]}
    return ids


def _expected(key: str) -> int:
    return 2 if in_canary("credit", "production", 30.0, key) else 1


def _keys() -> list[str]:
    """Keys of both arms (the first 40 keys hold both at 30 %)."""
    keys = [f"user-{i}" for i in range(40)]
    assert {_expected(k) for k in keys} == {1, 2}
    return keys


def test_predict_honours_the_split_and_says_which_version_answered(client, credit):
    for key in _keys():
        for _ in range(2):  # sticky: the same key twice, the same arm
            r = client.post("/predict", json={"model": "credit@production", "instances": ROWS},
                            headers={KEY: key})
            assert r.status_code == 200, r.text
            body, want = r.json(), _expected(key)
            assert (body["version"], body["model_id"]) == (want, credit[want - 1])
            assert body["arm"] == ("canary" if want == 2 else "primary")
            assert r.headers["X-Msvmav-Model-Version"] == str(want)
            assert r.headers["X-Msvmav-Model-Arm"] == body["arm"]


def test_without_a_header_the_first_row_id_routes_and_the_bare_name_is_split_too(client, credit):
    for key in _keys()[:12]:
        ids = [key] + [f"{key}-{j}" for j in range(1, len(ROWS))]
        r = client.post("/predict", json={"model": "credit", "instances": ROWS, "ids": ids})
        assert r.status_code == 200, r.text
        assert r.json()["version"] == _expected(key)  # (a bare name: its production alias)
    seen = {client.post("/predict", json={"model": "credit@production",
                                          "instances": ROWS}).json()["version"]
            for _ in range(60)}  # no key: drawn at random, 30 %: both arms (1 - 0.7**60 - 0.3**60)
    assert seen == {1, 2}
    # a version or a model id is never split
    r = client.post("/predict", json={"model": "credit/1", "instances": ROWS}, headers={KEY: "x"})
    assert r.json()["arm"] is None and r.json()["version"] == 1


def _v2(client, key):
    body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": [len(ROWS), 3],
                        "data": X.reshape(-1).tolist()}]}
    r = client.post("/v2/models/credit@production/infer", json=body, headers={KEY: key})
    assert r.status_code == 200, r.text
    version = int(r.json()["model_version"])
    assert r.json()["parameters"]["arm"] == ("canary" if version == 2 else "primary")
    return version, r.headers


def _invocations(client, key):
    r = client.post("/models/credit@production/invocations", json={"instances": ROWS},
                    headers={KEY: key})
    assert r.status_code == 200, r.text
    return int(r.headers["X-Msvmav-Model-Version"]), r.headers


def _file(client, key):
    r = client.post("/predict/file", files={"file": ("rows.csv", to_csv(X, Y))},
                    data={"model": "credit@production"}, headers={KEY: key})
    assert r.status_code == 200, r.text
    return r.json()["version"], r.headers


@pytest.mark.parametrize("door", [_v2, _invocations, _file], ids=["v2", "invocations", "file"])
def test_every_door_honours_the_split(client, credit, door):
    for key in _keys()[:10]:
        version, headers = door(client, key)
        assert version == _expected(key), key
        assert headers["X-Msvmav-Model-Version"] == str(version)


def test_a_batch_job_by_the_alias_is_scored_by_the_arm_its_key_chooses(client, worker, credit):
    for key in _keys()[:6]:
        r = client.post("/batch-predictions", files={"file": ("rows.csv", to_csv(X, Y))},
                        data={"model": "credit@production"}, headers={KEY: key})
        assert r.status_code == 202, r.text
        assert r.json()["params"]["model_id"] == credit[_expected(key) - 1]
    assert set(run_jobs(worker)) == {"succeeded"}


def _log(app) -> list[tuple]:
    writer = prediction_log.writer(app.state.runtime)
    assert writer is not None and writer.catch_up(30.0) == 0
    with app.state.engine.connect() as conn:
        return conn.execute(text(
            "SELECT prediction_id, version, model_id, alias, predicted, true_class, decision, "
            "clipped FROM prediction_log WHERE registered_model = 'credit' ORDER BY id")).all()


def test_the_log_records_the_version_that_answered_and_the_report_judges_each_arm(
    client, credit
):
    answered = {}
    for key in _keys():
        ids = [f"{key}:{j}" for j in range(len(ROWS))]
        r = client.post("/predict", json={"model": "credit@production", "instances": ROWS,
                                          "ids": ids}, headers={KEY: key})
        for p in r.json()["predictions"]:
            answered[p["id"]] = r.json()["version"]
    client.post("/predict", json={"model": "credit/2", "instances": ROWS})  # not the alias's
    rows = _log(client.app)
    assert {pid: v for pid, v, _m, alias, *_ in rows if alias == "production"} == answered
    # feedback on half of the ids (labels: the first class for all, so some are wrong)
    labelled = sorted(answered)[::2]
    classes = client.post("/predict", json={"model": "credit/1", "instances": ROWS}).json()
    first = classes["classes"][0]
    for version in (1, 2):
        ids = [i for i in labelled if answered[i] == version]
        r = client.post("/feedback", json={"model": f"credit/{version}", "ids": ids,
                                           "labels": [first] * len(ids)})
        assert r.status_code == 200, r.text
    report = client.get("/registered-models/credit/monitoring", params={"alias": "production"})
    assert report.status_code == 200, report.text
    arms = report.json()["arms"]
    assert (arms["version"], arms["canary"]) == (1, {"version": 2, "percent": 30.0})
    got = {a["version"]: a for a in arms["records"]}
    for version, model_id in ((1, credit[0]), (2, credit[1])):
        mine = [r for r in _log(client.app) if r[3] == "production" and r[1] == version]
        fed = [r for r in mine if r[5] is not None]
        arm = got[version]
        assert (arm["arm"], arm["model_id"], arm["n"], arm["n_labelled"]) == (
            "canary" if version == 2 else "primary", model_id, len(mine), len(fed))
        assert arm["accuracy"] == pytest.approx(np.mean([r[4] == r[5] for r in fed]))
        assert arm["mean_decision"] == pytest.approx(np.mean([r[6] for r in mine]))
        assert arm["predicted_counts"] == np.bincount([r[4] for r in mine]).tolist()
    # the arm's own report (its version's stored model), and the service function
    canary = client.get("/registered-models/credit/monitoring", params={"arm": "canary"})
    assert canary.status_code == 200 and canary.json()["model_id"] == credit[1]
    with client.app.state.runtime.sessions() as session:
        records = arm_records(session, "credit", "production")
    assert [(r.version, r.n) for r in records] == [(v, got[v]["n"]) for v in (1, 2)]


def test_the_history_records_the_canary_and_a_rollback_restores_it(client, credit):
    r = client.patch(ALIAS, json={"canary": {"version": 2, "percent": 50}})
    assert r.status_code == 200 and r.json()["canary"]["percent"] == 50.0
    # the registered model's detail and list name the canary version's stored model
    expected = {"production": {"version": 2, "percent": 50.0, "model_id": credit[1]}}
    assert client.get("/registered-models/credit").json()["canaries"] == expected
    assert client.get("/registered-models").json()["items"][0]["canaries"] == expected
    assert client.patch(ALIAS, json={"canary": None}).json()["canary"] is None
    detail = client.get("/registered-models/credit").json()
    assert detail["canaries"] == {} and detail["aliases"] == {"production": 1}
    r = client.post(ALIAS + "/rollback")  # the canary's end undone: back at 50 %
    assert r.status_code == 200 and r.json()["canary"]["percent"] == 50.0
    # PUT replaces the alias: promoting the canary's version ends the canary
    assert client.put(ALIAS, json={"version": 2}).json()["canary"] is None
    history = client.get("/registered-models/credit/history").json()["items"]
    moves = [(h["action"], h["from_version"], h["to_version"],
              h["from_canary"] and h["from_canary"]["percent"],
              h["to_canary"] and h["to_canary"]["percent"]) for h in history]
    assert moves == [
        ("set", 1, 2, 50.0, None),
        ("rollback", 1, 1, None, 50.0),
        ("canary", 1, 1, 50.0, None),
        ("canary", 1, 1, 30.0, 50.0),
        ("set", None, 1, None, 30.0),
    ]
    assert client.get("/registered-models").json()["items"][0]["canaries"] == {}


@pytest.mark.parametrize(("canary", "field", "status"), [
    ({"version": 2, "percent": 0}, "percent", 422),
    ({"version": 2, "percent": 100}, "percent", 422),
    ({"version": 2, "percent": -1}, "percent", 422),
    ({"version": 2, "percent": 101}, "percent", 422),
    ({"version": 2, "percent": "10"}, "percent", 422),
    ({"version": 1, "percent": 10}, "version", 422),  # the alias's own version
    ({"version": 9, "percent": 10}, "version", 404),  # an id that names nothing (as elsewhere)
    ({"version": 2}, "percent", 422),
])
def test_a_bad_canary_is_refused_naming_its_field(client, credit, canary, field, status):
    for method, body in (("put", {"version": 1, "canary": canary}), ("patch", {"canary": canary})):
        r = getattr(client, method)(ALIAS, json=body)
        problem = assert_problem(r, status)
        named = [e["loc"] for e in problem["errors"]]
        assert any(loc[-1] == field and "canary" in loc for loc in named), r.text


def test_nan_percent_and_an_unknown_alias_are_refused(client, credit):
    raw = b'{"canary": {"version": 2, "percent": NaN}}'
    r = client.patch(ALIAS, content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert_problem(client.patch("/registered-models/credit/aliases/nope",
                                json={"canary": {"version": 2, "percent": 5}}), 404)


def test_the_canary_version_cannot_be_removed_and_an_alias_with_one_is_not_exported(
    client, credit
):
    body = assert_problem(client.delete("/registered-models/credit/versions/2"), 409)
    assert "canary" in body["detail"]
    body = assert_problem(client.get("/models/credit@production/export",
                                     params={"format": "bundle"}), 409)
    assert "canary" in body["detail"] and "credit/2" in body["detail"]
    assert client.get("/models/credit/2/export", params={"format": "bundle"}).status_code == 200


def test_setting_a_canary_needs_a_write_key(admin_settings, engine):
    with TestClient(create_app(admin_settings)) as client:
        reader = bearer(make_key(engine, "read"))
        writer = bearer(make_key(engine, "write"))
        body = {"canary": {"version": 2, "percent": 10}}
        assert client.patch(ALIAS, json=body).status_code == 401
        assert client.patch(ALIAS, json=body, headers=reader).status_code == 403
        # a write key gets past the scope check to the registry (no such model: 404)
        assert client.patch(ALIAS, json=body, headers=writer).status_code == 404
        put = {"version": 1, "canary": {"version": 2, "percent": 10}}
        assert client.put(ALIAS, json=put, headers=reader).status_code == 403


# --- the recheck window still holds -----------------------------------------------------------


WINDOW = 30.0


def test_a_canaried_alias_reads_nothing_inside_the_recheck_window(settings, engine, worker,
                                                                  clock):
    windowed = settings.model_copy(
        update={"serve_recheck_seconds": WINDOW, "admin_key": SecretStr(ADMIN)})
    with TestClient(create_app(windowed), headers=bearer(ADMIN)) as served:
        ids = [trained_model(served, worker)["id"],
               trained_model(served, worker, alpha=0.01)["id"]]
        assert served.post("/registered-models", json={"name": "credit"}).status_code == 201
        for model_id in ids:
            served.post("/registered-models/credit/versions", json={"model_id": model_id})
        served.put(ALIAS, json={"version": 1, "canary": {"version": 2, "percent": 30}})
        keys = _keys()[:8]

        def ask(key: str) -> int:
            r = served.post("/predict", json={"model": "credit@production", "instances": ROWS},
                            headers={KEY: key})
            assert r.status_code == 200, r.text
            return r.json()["version"]

        first = [ask(k) for k in keys]  # both arms' models read and cached
        assert set(first) == {1, 2}
        clock.t += WINDOW / 4
        with Reads(served.app) as reads:
            again = [ask(k) for k in keys]
        assert reads.seen == [], reads.seen
        assert again == first == [_expected(k) for k in keys]
        served.app.state.runtime.get(refresh.REFRESHER).wait()
