"""The bound on a serving request's checks (app.core.recheck, MSVMAV_SERVE_RECHECK_SECONDS): a
model deleted, an alias moved or a key revoked by another process stops serving at most the
window after the change, at once in the process that made it, and at once everywhere with a
window of 0 (SQLite's default). The window's clock is the test's: events, not sleeps. SQLite,
and PostgreSQL when TEST_DATABASE_URL is set (the window is set explicitly: it applies to
both)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.orm import Session

from app.auth import service as keys_service
from app.auth.gate import OPEN_RECHECK_SECONDS
from app.auth.keys import Scope
from app.core import recheck
from app.core.config import Settings
from app.core.db import make_engine
from app.main import create_app
from app.models import service as models_service
from app.serving import refresh
from app.serving.acquire import held
from app.serving.target import Target
from tests.app.support import assert_problem, blobs, trained_model

WINDOW = 30.0
ADMIN = "admin-key-from-the-environment-0123456789"
X, _ = blobs(n=1, seed=4)
ROW = X.tolist()


@pytest.fixture
def windowed(settings: Settings) -> Settings:
    return settings.model_copy(update={"serve_recheck_seconds": WINDOW})


@pytest.fixture
def served(windowed: Settings, engine) -> Iterator[TestClient]:
    """The API process under test, trusting its checks for WINDOW seconds."""
    with TestClient(create_app(windowed)) as c:
        yield c


@pytest.fixture
def elsewhere(settings: Settings, engine) -> Iterator[TestClient]:
    """Another API process on the same database (its own engine, caches and gate)."""
    with TestClient(create_app(settings)) as c:
        yield c


def _predict(client: TestClient, **target) -> dict:
    r = client.post("/predict", json={**target, "instances": ROW}, headers={"X-Request-ID": "1"})
    assert r.status_code == 200, r.text
    return r.json()


def test_default_window_is_one_second_on_either_database():
    """SQLite too (it read on every request: under load a keyed one-row /predict lost a quarter
    of its throughput to the key's read, bench/serve.py --matrix)."""
    for url in ("sqlite:///unused.db", "postgresql+psycopg://unused@127.0.0.1/unused"):
        assert Settings(database_url=url).serve_recheck_seconds == 1.0
    assert not recheck.fresh(recheck.now(), 0.0)  # a window of 0 trusts nothing


def test_model_deleted_elsewhere_is_served_at_most_the_window(
    served, elsewhere, worker, clock, windowed
):
    model = trained_model(served, worker)
    first = _predict(served, model_id=model["id"])
    app = served.app
    fresh = held(app.state.runtime, Target(model_id=model["id"]))
    assert fresh is not None and fresh.stamp is not None  # the next answer needs no read
    assert elsewhere.delete(f"/models/{model['id']}").status_code == 204
    clock.t += WINDOW - 0.001  # within the window: the documented staleness
    assert _predict(served, model_id=model["id"])["predictions"] == first["predictions"]
    clock.t += 0.002  # the window passed since the last check: read again, and refused
    r = served.post("/predict", json={"model_id": model["id"], "instances": ROW})
    assert assert_problem(r, 404, "model_id")["detail"].endswith(f"model {model['id']} not found")
    assert app.state.runtime.get(models_service.MODEL_CACHE).get(model["id"]) is None


def test_checks_are_renewed_ahead_off_the_request_path(served, worker, clock):
    """A request finding its checks older than half the window is answered from what the
    process holds, and they are read again in the background (app.serving.refresh): a window
    after the first check, the next request still needs no read on its own path."""
    ids = _two_versions(served, worker)
    runtime = served.app.state.runtime
    by_id, by_alias = Target(model_id=ids[0]), Target(reference="credit@production")
    _predict(served, model_id=ids[0])
    _predict(served, model="credit@production")  # both checked now
    refresher = runtime.get(refresh.REFRESHER)
    renewed = refresher.renewed
    clock.t += WINDOW * 0.4  # younger than half the window: nothing asked
    assert held(runtime, by_id) is not None
    refresher.wait()
    assert refresher.renewed == renewed
    clock.t += WINDOW * 0.2  # older than half: held, and renewed in the background
    assert held(runtime, by_id) is not None
    assert held(runtime, by_alias) is not None
    refresher.wait()
    assert refresher.renewed == renewed + 2
    clock.t += WINDOW * 0.6  # 1.2 windows after the first checks, 0.6 after the renewals
    assert held(runtime, by_id) is not None
    assert held(runtime, by_alias).model_id == ids[0]


def test_model_deleted_by_this_process_is_refused_at_once(served, worker, clock):
    model = trained_model(served, worker)
    _predict(served, model_id=model["id"])
    assert served.delete(f"/models/{model['id']}").status_code == 204
    r = served.post("/predict", json={"model_id": model["id"], "instances": ROW})
    assert_problem(r, 404, "model_id")  # the clock did not move


def _two_versions(client: TestClient, worker) -> list[int]:
    ids = [trained_model(client, worker)["id"], trained_model(client, worker, alpha=0.01)["id"]]
    assert client.post("/registered-models", json={"name": "credit"}).status_code == 201
    for i in ids:
        r = client.post("/registered-models/credit/versions", json={"model_id": i})
        assert r.status_code == 201, r.text
    r = client.put("/registered-models/credit/aliases/production", json={"version": 1})
    assert r.status_code == 200, r.text
    return ids


def test_alias_moved_elsewhere_is_followed_within_the_window(served, elsewhere, worker, clock):
    ids = _two_versions(served, worker)
    assert _predict(served, model="credit@production")["model_id"] == ids[0]
    _predict(served, model_id=ids[1])  # both versions cached: only the alias is in question
    r = elsewhere.put("/registered-models/credit/aliases/production", json={"version": 2})
    assert r.status_code == 200, r.text
    clock.t += WINDOW - 0.001
    assert _predict(served, model="credit@production")["model_id"] == ids[0]
    clock.t += 0.002
    moved = _predict(served, model="credit@production")
    assert (moved["model_id"], moved["version"]) == (ids[1], 2)


def test_alias_moved_by_this_process_is_followed_at_once(served, worker, clock):
    ids = _two_versions(served, worker)
    assert _predict(served, model="credit@production")["model_id"] == ids[0]
    r = served.put("/registered-models/credit/aliases/production", json={"version": 2})
    assert r.status_code == 200, r.text
    assert _predict(served, model="credit@production")["model_id"] == ids[1]
    assert served.delete("/registered-models/credit/aliases/production").status_code == 204
    r = served.post("/predict", json={"model": "credit@production", "instances": ROW})
    assert r.status_code == 404, r.text


@pytest.fixture
def keyed(windowed: Settings, engine) -> Iterator[TestClient]:
    """The process under test with keys required (MSVMAV_ADMIN_KEY set)."""
    keyed_settings = windowed.model_copy(update={"admin_key": SecretStr(ADMIN)})
    with TestClient(create_app(keyed_settings)) as c:
        yield c


def _key(engine, scope: str = "read") -> tuple[int, str]:
    """A key made as `msvmav keys create` does, in another process's session."""
    with Session(engine) as session:
        row, secret = keys_service.create(session, f"{scope} key", Scope(scope))
        return row.id, secret


def test_key_revoked_elsewhere_works_at_most_the_window(keyed, settings, clock):
    other = make_engine(settings.database_url)  # `msvmav keys revoke`'s own engine
    try:
        key_id, secret = _key(other)
        auth = {"Authorization": f"Bearer {secret}"}
        assert keyed.get("/datasets", headers=auth).status_code == 200
        with Session(other) as session:
            keys_service.revoke(session, key_id)
        clock.t += WINDOW - 0.001
        assert keyed.get("/datasets", headers=auth).status_code == 200
        clock.t += 0.002
        r = keyed.get("/datasets", headers=auth)
        assert_problem(r, 401)
        assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        # refused keys are never remembered: still refused, whatever the clock
        assert_problem(keyed.get("/datasets", headers=auth), 401)
    finally:
        other.dispose()


def test_a_key_check_is_renewed_ahead_and_a_revocation_seen_by_it(keyed, engine, clock):
    """A request finding its key's check older than half the window is admitted from memory
    and the key read again in the background: a window after the first read the key needs no
    read on the request path; revoked elsewhere, the renewal forgets it (the next request
    reads, and is refused, before the window has passed)."""
    key_id, secret = _key(engine)
    auth = {"Authorization": f"Bearer {secret}"}
    gate = keyed.app.state.auth
    assert keyed.get("/datasets", headers=auth).status_code == 200  # read at t0
    clock.t += WINDOW * 0.6
    assert keyed.get("/datasets", headers=auth).status_code == 200  # held; renewal asked
    gate.settle()
    clock.t += WINDOW * 0.6  # 1.2 windows after the first read, 0.6 after the renewal
    assert gate.held(auth["Authorization"]) is not None  # (and renewed again)
    gate.settle()
    with Session(engine) as session:
        keys_service.revoke(session, key_id)
    clock.t += WINDOW * 0.6  # held once more, renewal asked: it reads the revocation
    assert keyed.get("/datasets", headers=auth).status_code == 200
    gate.settle()
    assert gate.held(auth["Authorization"]) is None  # the renewal read the revocation
    assert_problem(keyed.get("/datasets", headers=auth), 401)


def test_the_open_state_is_renewed_ahead_and_a_new_key_closes_it(served, engine):
    """Keys off (none exists): past half OPEN_RECHECK_SECONDS the question is asked again in
    the background, so no request asks it itself; a key created elsewhere meanwhile closes
    the service through that renewal."""
    gate = served.app.state.auth
    assert served.get("/datasets").status_code == 200  # read: open for OPEN_RECHECK_SECONDS
    assert not gate.known_required()
    near = time.monotonic() + OPEN_RECHECK_SECONDS * 0.4  # as if asked 0.6 of it ago
    gate._open_until = near
    assert gate.known_open()  # still open: renewal asked
    gate.settle()
    assert gate._open_until > near  # renewed from before its read, no request waited
    _key(engine)
    gate._open_until = time.monotonic() + OPEN_RECHECK_SECONDS * 0.4
    assert gate.known_open()
    gate.settle()
    assert gate.known_required()  # the renewal found the key
    assert_problem(served.get("/datasets"), 401)


def test_key_revoked_over_this_process_is_refused_at_once(keyed, engine, clock):
    key_id, secret = _key(engine)
    auth = {"Authorization": f"Bearer {secret}"}
    assert keyed.get("/datasets", headers=auth).status_code == 200
    admin = {"Authorization": f"Bearer {ADMIN}"}
    assert keyed.delete(f"/keys/{key_id}", headers=admin).status_code == 204
    assert_problem(keyed.get("/datasets", headers=auth), 401)  # the clock did not move


def test_a_new_key_works_at_once(keyed, engine, clock):
    """Only keys found usable are remembered: an unknown key that becomes valid (created by
    another process) is read again on its next request."""
    assert_problem(keyed.get("/datasets", headers={"Authorization": "Bearer msv_nope"}), 401)
    _key_id, secret = _key(engine)
    assert keyed.get("/datasets", headers={"Authorization": f"Bearer {secret}"}).status_code == 200


def test_window_zero_reads_every_request(settings, engine, worker, clock):
    """With a window of 0 a change elsewhere is seen by the very next request, whatever the
    database (SQLite's default)."""
    strict = settings.model_copy(update={"serve_recheck_seconds": 0.0})
    with TestClient(create_app(strict)) as a, TestClient(create_app(settings)) as b:
        model = trained_model(a, worker)
        _predict(a, model_id=model["id"])
        target = Target(model_id=model["id"])
        assert held(a.app.state.runtime, target) is None
        assert b.delete(f"/models/{model['id']}").status_code == 204
        r = a.post("/predict", json={"model_id": model["id"], "instances": ROW})
        assert_problem(r, 404, "model_id")


def test_a_remembered_key_is_refused_from_its_expiry_not_a_window_later(keyed, engine, clock):
    """A key found usable is remembered for the window, but its ``expires_at`` travels with it:
    once the expiry passes, the next request is refused (401 naming the expiry) although the
    window's clock did not move. The keys' wall clock is the test's too (``clock.ahead``)."""
    from datetime import UTC, datetime, timedelta

    expires_at = datetime.now(UTC) + timedelta(hours=1)
    with Session(engine) as session:
        _row, secret = keys_service.create(session, "short", Scope.read, expires_at)
    auth = {"Authorization": f"Bearer {secret}"}
    assert keyed.get("/datasets", headers=auth).status_code == 200  # remembered now
    clock.ahead = 3600.001  # the wall clock passes the expiry; the window's does not move
    r = keyed.get("/datasets", headers=auth)
    assert_problem(r, 401)
    assert "expired" in r.json()["detail"]
