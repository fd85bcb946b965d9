"""Alembic migrations produce exactly the ORM schema, on every backend."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from app.core.db import (
    alembic_config,
    current_heads,
    is_sqlite,
    make_engine,
    script_heads,
    upgrade_to_head,
)
from app.tables import Base
from tests.app.support import create_postgres_database, drop_postgres_database


def _diff(engine: Engine) -> list:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(ctx, Base.metadata)


@pytest.fixture
def fresh_url(database_url: str, tmp_path) -> Iterator[str]:
    """A new, empty database on the backend of ``database_url``; dropped afterwards."""
    if is_sqlite(database_url):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    admin = os.environ["TEST_DATABASE_URL"]
    url = create_postgres_database(admin)
    try:
        yield url
    finally:
        drop_postgres_database(admin, url)


@pytest.fixture
def fresh_engine(fresh_url: str) -> Iterator[Engine]:
    engine = make_engine(fresh_url)
    yield engine
    engine.dispose()


def test_upgrade_head_matches_the_orm_exactly(database_url, engine):
    assert _diff(engine) == []
    assert current_heads(engine) == script_heads(database_url)


def test_orm_without_migrations_would_differ(fresh_engine):
    """The comparison is not vacuous: an empty database differs from the ORM."""
    assert _diff(fresh_engine) != []


def _sqlite_schema(engine: Engine) -> list:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT type, name, tbl_name, sql FROM sqlite_master "
                "WHERE tbl_name != 'alembic_version'"
            )
        )
        return sorted(rows.all())


def test_upgrade_head_emits_the_ddl_of_the_orm_on_sqlite(tmp_path):
    """What compare_metadata does not look at (CHECK constraints, AUTOINCREMENT) matches too:
    on SQLite the stored CREATE statements of a migrated and a create_all database are equal."""
    migrated_url = f"sqlite:///{tmp_path / 'migrated.db'}"
    upgrade_to_head(migrated_url)
    migrated = make_engine(migrated_url)
    created = make_engine(f"sqlite:///{tmp_path / 'created.db'}")
    try:
        Base.metadata.create_all(created)
        assert _sqlite_schema(migrated) == _sqlite_schema(created)
    finally:
        migrated.dispose()
        created.dispose()


def test_downgrade_to_base_and_upgrade_again(fresh_url, fresh_engine):
    upgrade_to_head(fresh_url)
    with fresh_engine.begin() as conn:
        command.downgrade(alembic_config(fresh_url, conn), "base")
    assert set(inspect(fresh_engine).get_table_names()) <= {"alembic_version"}
    upgrade_to_head(fresh_url)
    assert _diff(fresh_engine) == []


def test_msvmav_migrate_works_from_any_directory(fresh_url, fresh_engine, tmp_path):
    env = {**os.environ, "MSVMAV_DATABASE_URL": fresh_url}
    out = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "migrate"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert _diff(fresh_engine) == []


def test_revision_0002_renames_the_algorithm_of_existing_models(fresh_url, fresh_engine):
    with fresh_engine.begin() as conn:
        cfg = alembic_config(fresh_url, conn)
        command.upgrade(cfg, "0001")
        conn.execute(
            text(
                "INSERT INTO models (algorithm, params, scaling, classes, n_features, "
                "feature_names, encoding, estimator_meta, summary, n_train, n_test, "
                "fit_seconds, n_iter, created_at) VALUES ('MSVMAv', '{}', 'minmax', '[]', "
                "1, '[]', '{}', '{}', '{}', 2, 0, 0.1, 1, CURRENT_TIMESTAMP)"
            )
        )
        command.upgrade(cfg, "head")
        assert conn.scalar(text("SELECT algorithm FROM models")) == "msvmav"
        assert "experiment_results" in inspect(conn).get_table_names()


def test_revision_0006_splits_existing_arrays_into_chunks(fresh_url, fresh_engine, monkeypatch):
    """Arrays stored whole (one row each) before 0006 are cut into chunks of at most
    MSVMAV_ARRAY_CHUNK_BYTES in SQL and read back equal; a downgrade joins them again."""
    from sqlalchemy.orm import Session

    from app.core import storage
    from app.datasets.orm import DatasetArray
    from app.models.orm import ModelArray

    monkeypatch.setenv("MSVMAV_ARRAY_CHUNK_BYTES", "1000")
    X = np.random.default_rng(0).normal(size=(300, 4))
    y = np.array(["neg", "pos"] * 150)
    coef = np.arange(7.0)
    old = {"X": storage.array_to_bytes(X), "y": storage.array_to_bytes(y)}
    with fresh_engine.begin() as conn:
        cfg = alembic_config(fresh_url, conn)
        command.upgrade(cfg, "0005")
        conn.execute(text(
            "INSERT INTO datasets (name, filename, format, n_rows, n_features, n_rows_dropped, "
            "sparse, feature_names, classes, class_counts, encoding, options, sha256, "
            "size_bytes, created_at) VALUES ('d', 'd.csv', 'csv', 300, 4, 0, false, '[]', '[]', "
            "'[]', '{}', '{}', 'x', 1, CURRENT_TIMESTAMP)"))
        conn.execute(text(
            "INSERT INTO models (algorithm, params, scaling, classes, n_features, "
            "feature_names, encoding, estimator_meta, summary, n_train, n_test, "
            "fit_seconds, n_iter, created_at) VALUES ('msvmav', '{}', 'minmax', '[]', "
            "1, '[]', '{}', '{}', '{}', 2, 0, 0.1, 1, CURRENT_TIMESTAMP)"))
        ds = conn.scalar(text("SELECT id FROM datasets"))
        model = conn.scalar(text("SELECT id FROM models"))
        for name, data in old.items():
            conn.execute(text("INSERT INTO dataset_arrays (dataset_id, name, data) "
                              "VALUES (:i, :n, :d)"), {"i": ds, "n": name, "d": data})
        conn.execute(text("INSERT INTO model_arrays (model_id, name, data) VALUES (:i, 'e.coef', "
                          ":d)"), {"i": model, "d": storage.array_to_bytes(coef)})
        command.upgrade(cfg, "head")
    with Session(fresh_engine) as session:
        chunks = session.execute(text(
            "SELECT name, chunk, length(data) FROM dataset_arrays ORDER BY name, chunk")).all()
        arrays = storage.read_arrays(session, DatasetArray, ds)
        model_arrays = storage.read_arrays(session, ModelArray, model)
    assert [c for n, c, _ in chunks if n == "X"] == list(range(len(old["X"]) // 1000 + 1))
    assert all(size <= 1000 for _, _, size in chunks)
    assert sum(size for n, _, size in chunks if n == "X") == len(old["X"])
    np.testing.assert_array_equal(arrays["X"], X)
    assert arrays["y"].tolist() == y.tolist()
    np.testing.assert_array_equal(model_arrays["e.coef"], coef)
    with fresh_engine.begin() as conn:
        command.downgrade(alembic_config(fresh_url, conn), "0005")
        back = dict(conn.execute(text("SELECT name, data FROM dataset_arrays")).all())
    assert {k: bytes(v) for k, v in back.items()} == old
