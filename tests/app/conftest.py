"""Fixtures for the service tests: a real database per test session (SQLite file, and a fresh
uniquely named PostgreSQL database when TEST_DATABASE_URL is set), migrated with Alembic."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.core.config import Settings
from app.core.db import make_engine
from app.jobs.worker import Worker
from app.main import create_app, shut_down
from app.monitoring import inputs, shadow
from app.monitoring import log as prediction_log
from app.tables import Base
from tests.app.alert_clock import alert_clock  # noqa: F401  (the alert evaluators' test clock)
from tests.app.auth_support import ADMIN
from tests.app.recheck_clock import clock  # noqa: F401  (the recheck window's test clock)
from tests.app.support import migrated_database

BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get("TEST_DATABASE_URL") else [])


@pytest.fixture(scope="session", params=BACKENDS)
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """An empty database migrated to head with Alembic (not create_all). Before it is dropped,
    no app's background writer may still be running: each app's shutdown stops its own, and a
    writer left running would write to (and log failures against) a database that is gone."""
    with migrated_database(request.param, tmp_path_factory.mktemp("db")) as url:
        yield url
        assert running_writers() == []


def running_writers() -> list[str]:
    """The prediction log's, its inputs' and the shadow scorer's threads still alive in this
    process."""
    kinds = (prediction_log.PredictionLogWriter, inputs.InputWriter, shadow.ShadowScorer)
    names = {"msvmav-" + kind.label.replace(" ", "-") for kind in kinds}
    return [t.name for t in threading.enumerate() if t.name in names and t.is_alive()]


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        worker_poll_interval=0.05,
        heartbeat_interval=0.5,
        lease_seconds=30.0,
        cancel_check_interval=0.05,
        _env_file=None,
    )


@pytest.fixture
def engine(settings: Settings):
    """Engine on the session's database, emptied before each test."""
    eng = make_engine(settings.database_url)
    with eng.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    yield eng
    eng.dispose()


@pytest.fixture
def app(settings: Settings, engine) -> Iterator[FastAPI]:
    """The app; shut down afterwards even when no TestClient ran its lifespan (a test that
    drives its prediction log directly would otherwise leave the writer's thread running
    against the session's database after it is dropped)."""
    application = create_app(settings)
    yield application
    shut_down(application)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@pytest.fixture
def worker(settings: Settings, engine) -> Worker:
    return Worker(settings, engine=engine)


@pytest.fixture
def admin_settings(settings: Settings) -> Settings:
    """The settings with MSVMAV_ADMIN_KEY set (tests.app.auth_support.ADMIN): keys required."""
    return settings.model_copy(update={"admin_key": SecretStr(ADMIN)})


@pytest.fixture
def keyed(admin_settings: Settings, engine) -> Iterator[TestClient]:
    """A client of an app with MSVMAV_ADMIN_KEY set (keys required)."""
    with TestClient(create_app(admin_settings)) as c:
        yield c


@pytest.fixture
def cli_env(monkeypatch, tmp_path) -> Iterator[None]:
    """No MSVMAV_* from the outside, no .env; the root logger as it was after the test."""
    for name in ("MSVMAV_AUTH", "MSVMAV_ADMIN_KEY", "MSVMAV_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
