"""API keys on the serving path: with MSVMAV_SERVE_RECHECK_SECONDS=0 (SQLite's default) every
request's key is looked up in the database, so a revocation anywhere is honoured on the next
request (a longer window's bound: tests/app/test_serving_recheck.py); the lookup neither writes
nor waits for a writer, and ``last_used_at`` is stamped in the background. SQLite, and
PostgreSQL when TEST_DATABASE_URL is set."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text, update
from sqlalchemy.orm import Session

from app.auth import service
from app.auth.keys import Scope
from app.auth.orm import ApiKey
from app.core.db import fetch_one, is_sqlite, read_only, reader_engine
from app.main import create_app
from tests.app.support import (
    assert_problem,
    blobs,
    sqlite_write_lock,
    trained_model,
    wait_for,
)


def make_key(engine, scope: str = "write") -> tuple[int, str]:
    """A key created as `msvmav keys create` does, in another process's session."""
    with Session(engine) as session:
        row, secret = service.create(session, f"{scope} key", Scope(scope))
        return row.id, secret


def last_used(engine, key_id: int):
    with Session(read_only(engine)) as session:  # (a writer's lock must not hold it up)
        return session.scalar(select(ApiKey.last_used_at).where(ApiKey.id == key_id))


@pytest.fixture
def keyed_client(settings, engine) -> Iterator[TestClient]:
    """A client of an app that requires keys (one exists before it starts)."""
    with TestClient(create_app(settings.model_copy(update={"auth": "on"}))) as c:
        yield c


@pytest.fixture
def strict_keyed_client(settings, engine) -> Iterator[TestClient]:
    """``keyed_client`` reading the key on every request (MSVMAV_SERVE_RECHECK_SECONDS=0,
    SQLite's default; a longer window's bound: tests/app/test_serving_recheck.py)."""
    strict = settings.model_copy(update={"auth": "on", "serve_recheck_seconds": 0.0})
    with TestClient(create_app(strict)) as c:
        yield c


def test_key_revoked_by_another_process_is_refused_on_the_next_request(
    strict_keyed_client, engine, worker
):
    keyed_client = strict_keyed_client
    key_id, secret = make_key(engine)
    keyed_client.headers["Authorization"] = f"Bearer {secret}"
    model = trained_model(keyed_client, worker)
    X, _ = blobs(n=1, seed=1)
    body = {"model_id": model["id"], "instances": X.tolist()}
    for _ in range(3):  # warm: the model is cached, the key is not
        assert keyed_client.post("/predict", json=body).status_code == 200
    with Session(engine) as session:  # `msvmav keys revoke` in another process
        service.revoke(session, key_id)
    for r in (keyed_client.post("/predict", json=body), keyed_client.get("/datasets")):
        assert_problem(r, 401)
        assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'


def test_key_use_is_stamped_once_per_resolution_not_on_every_request(keyed_client, engine):
    key_id, secret = make_key(engine, "read")
    auth = {"Authorization": f"Bearer {secret}"}
    assert last_used(engine, key_id) is None
    assert keyed_client.get("/datasets", headers=auth).status_code == 200
    wait_for(lambda: last_used(engine, key_id) is not None, timeout=10)
    with Session(engine) as session:  # forget it behind the API's back
        session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=None))
        session.commit()
    for _ in range(5):
        assert keyed_client.get("/datasets", headers=auth).status_code == 200
    # The stamps are written in order by one background thread; close() returns once every
    # stamp submitted so far is written: one submitted by these reads would have landed.
    keyed_client.app.state.auth.close()
    assert last_used(engine, key_id) is None  # reads did not write again within the minute


def test_first_use_of_a_key_does_not_wait_for_a_writer(keyed_client, engine, settings):
    """Another process holds SQLite's write lock (PostgreSQL: the key's row lock): a key's first
    request still answers at once; its last_used_at lands once the writer is done. Before, the
    request itself committed the stamp and waited for the lock (SQLite's busy timeout: 30 s)."""
    key_id, secret = make_key(engine, "read")
    auth = {"Authorization": f"Bearer {secret}"}
    hold = 6.0
    with ExitStack() as stack:
        if is_sqlite(settings.database_url):
            timer = stack.enter_context(sqlite_write_lock(settings.database_url, hold))
        else:
            other = create_engine(settings.database_url)
            stack.callback(other.dispose)
            conn = stack.enter_context(other.connect())
            conn.execute(text("SELECT id FROM api_keys WHERE id = :id FOR UPDATE"), {"id": key_id})
            timer = threading.Timer(hold, conn.rollback)
            timer.start()
            stack.callback(timer.cancel)
        t0 = time.monotonic()
        assert keyed_client.get("/datasets", headers=auth).status_code == 200
        assert time.monotonic() - t0 < hold / 2
        assert last_used(engine, key_id) is None  # still waiting for the writer
        timer.join()
        wait_for(lambda: last_used(engine, key_id) is not None, timeout=15)


@pytest.fixture
def reader(engine):
    """fetch_one's own pool on the test database (as a Runtime keeps one)."""
    reader = reader_engine(engine)
    yield reader
    reader.dispose()


def test_fetch_one_reads_what_the_orm_reads(engine, reader):
    """The raw per-request read (driver placeholders) agrees with an ORM query."""
    key_id, secret = make_key(engine, "admin")
    with Session(engine) as session:
        row = session.get(ApiKey, key_id)
        expected = (row.id, row.name, row.scope)
    sql = "SELECT id, name, scope FROM api_keys WHERE key_hash = ? AND id = ?"
    params = (row.key_hash, key_id)
    assert fetch_one(reader, sql, params) == expected
    assert fetch_one(reader, sql, ("0" * 64, key_id)) is None
    principal = service.lookup(reader, secret, None)
    assert principal is not None
    assert (principal.key_id, principal.scope) == (key_id, Scope.admin)


def test_fetch_one_survives_connections_the_server_dropped(engine, reader, settings):
    """PostgreSQL: the per-request reads' pool does not ping its connections when taking them;
    one the server closed (a restart, an idle timeout) is replaced on the spot."""
    if is_sqlite(settings.database_url):
        pytest.skip("a server database")
    key_id, secret = make_key(engine, "read")
    for _ in range(3):  # the reader pool now holds a connection
        assert service.lookup(reader, secret, None).key_id == key_id
    admin = create_engine(settings.database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        killed = conn.execute(text(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )).scalar()
    admin.dispose()
    assert killed >= 1
    assert service.lookup(reader, secret, None).key_id == key_id
    assert fetch_one(reader, "SELECT id FROM api_keys WHERE id = ?", (key_id,)) == (key_id,)
