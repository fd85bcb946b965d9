"""Issue 28, point 9 (each on SQLite, and PostgreSQL when TEST_DATABASE_URL is set): 405 for a
wrong method on a static path and an ``Allow`` that names only its methods; strict timestamps;
keys that expire (401 naming the expiry); a failed job's message naming its cause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.auth import service as auth_service
from app.auth.orm import ApiKey
from app.jobs.orm import Job
from app.jobs.runtime import FAILURE_MESSAGE_CHARS, failure_message
from tests.app.auth_support import ADMIN, bearer
from tests.app.support import assert_problem, blobs, run_jobs, submit, to_csv, upload

# --- 405 on static paths ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "OPTIONS"])
def test_a_wrong_method_on_a_static_path_is_405_naming_its_methods(client, method):
    r = client.request(method, "/models/import")
    assert_problem(r, 405)
    assert r.headers["allow"] == "POST"


def test_options_lists_only_the_methods_that_are_there(client):
    r = client.options("/keys")
    assert_problem(r, 405)
    assert r.headers["allow"] == "GET, POST"
    # a parametrised path still lists every method of its routes
    r = client.options("/models/1")
    assert set(r.headers["allow"].split(", ")) == {"GET", "DELETE"}


def test_the_parametrised_route_still_answers_its_own_paths(client):
    assert_problem(client.get("/models/12345"), 404)
    assert client.post("/models/import").status_code == 422  # (no file: the route's own 422)


# --- strict timestamps -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "0.5",
        "1700000000",
        "2026-11-28 01:02:03",
        "2026-W48-1",
        "tomorrow",
        "2026-11-28T01:02:03.1234567Z",
    ],
)
def test_a_timestamp_that_is_not_iso_text_is_422(client, value):
    r = client.get("/models/1/monitoring", params={"until": value})
    body = assert_problem(r, 422, "until")
    assert "must be a timestamp" in body["detail"], body


@pytest.mark.parametrize(
    "value",
    ["2026-11-28", "2026-11-28T01:02", "2026-11-28T01:02:03Z", "2026-11-28T01:02:03.5+02:00"],
)
def test_iso_timestamps_are_accepted(client, value):
    # accepted: the answer is about the model (there is none), not the timestamp
    body = assert_problem(client.get("/models/1/monitoring", params={"until": value}), 404)
    assert "model 1" in body["detail"]


# --- keys that expire ------------------------------------------------------------------------


def test_a_key_created_with_expires_at_works_until_then_and_is_401_after(keyed, engine,
                                                                          monkeypatch):
    admin = bearer(ADMIN)
    now = datetime.now(UTC)
    soon = now + timedelta(seconds=30)
    # the key checks' wall clock (app.auth.service.utcnow) stands still at `now` until moved:
    # a loaded machine taking seconds over the requests below cannot expire the key early
    monkeypatch.setattr(auth_service, "utcnow", lambda: now)
    r = keyed.post(
        "/keys",
        json={"name": "brief", "scope": "read", "expires_at": soon.isoformat()},
        headers=admin,
    )
    assert r.status_code == 201, r.text
    created = r.json()
    shown = datetime.fromisoformat(created["expires_at"])
    assert abs((shown - soon).total_seconds()) < 1e-3
    listed = keyed.get("/keys", headers=admin).json()["items"]
    assert [k["expires_at"] for k in listed] == [created["expires_at"]]
    assert (
        keyed.get(f"/keys/{created['id']}", headers=admin).json()["expires_at"]
        == (created["expires_at"])
    )
    secret = created["key"]
    assert keyed.get("/datasets", headers=bearer(secret)).status_code == 200
    # the wall clock the key checks read (app.auth.service.utcnow) moves past the expiry
    monkeypatch.setattr(auth_service, "utcnow", lambda: soon + timedelta(seconds=0.2))
    body = assert_problem(keyed.get("/datasets", headers=bearer(secret)), 401)
    assert "expired at" in body["detail"] and soon.isoformat()[:19] in body["detail"], body


def test_a_key_past_its_expiry_in_the_database_is_401(keyed, engine):
    admin = bearer(ADMIN)
    created = keyed.post(
        "/keys", json={"name": "old", "scope": "read", "expires_at": "2099-01-01"}, headers=admin
    ).json()
    assert created["expires_at"].startswith("2099-01-01T00:00:00")
    past = datetime(2020, 5, 17, 8, 30, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(update(ApiKey).where(ApiKey.id == created["id"]).values(expires_at=past))
    body = assert_problem(keyed.get("/datasets", headers=bearer(created["key"])), 401)
    assert "expired at 2020-05-17T08:30:00+00:00" in body["detail"], body


@pytest.mark.parametrize(
    ("expires_at", "words"),
    [
        ("2001-01-01T00:00:00Z", "in the future"),
        (1893456000, "must be a timestamp"),
        ("next year", "must be a timestamp"),
    ],
)
def test_an_expiry_in_the_past_or_not_a_timestamp_is_422(keyed, engine, expires_at, words):
    r = keyed.post(
        "/keys",
        json={"name": "x", "scope": "read", "expires_at": expires_at},
        headers=bearer(ADMIN),
    )
    body = assert_problem(r, 422, "expires_at")
    assert words in body["detail"], body
    with Session(engine) as session:
        assert session.scalars(select(ApiKey)).all() == []


# --- a failed job's message ------------------------------------------------------------------


def test_a_failed_jobs_message_names_its_cause_in_one_line(client, worker, engine):
    ds = upload(client, to_csv(*blobs(n=30)))
    job = submit(client, ds["id"], max_iter=10)
    with engine.begin() as conn:
        conn.execute(
            update(Job).where(Job.id == job["id"]).values(params={**job["params"], "alpha": -1.0})
        )
    assert run_jobs(worker) == ["failed"]
    body = client.get(f"/jobs/{job['id']}").json()
    assert body["message"].startswith("failed: the job's params are not a valid TrainJob: alpha")
    assert "\n" not in body["message"] and len(body["message"]) <= FAILURE_MESSAGE_CHARS
    assert body["error"].splitlines()[0] in body["message"] or body["message"].endswith("…")


def test_failure_message_takes_the_first_line_and_cuts_it():
    assert failure_message("boom\nTraceback: ...") == "failed: boom"
    assert failure_message("") == "failed"
    long = failure_message("x" * 1000)
    assert len(long) == FAILURE_MESSAGE_CHARS and long.endswith("…")
