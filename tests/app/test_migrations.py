"""Alembic migrations produce exactly the ORM schema, on every backend."""

from __future__ import annotations

import os
import subprocess
import sys

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from app.db import alembic_config, current_heads, make_engine, script_heads, upgrade_to_head
from app.orm import Base
from tests.app.support import create_postgres_database, drop_postgres_database


def _diff(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()


def test_upgrade_head_matches_the_orm_exactly(database_url, engine):
    assert _diff(database_url) == []
    assert current_heads(engine) == script_heads(database_url)


def test_orm_without_migrations_would_differ(tmp_path):
    """The comparison is not vacuous: an empty database differs from the ORM."""
    assert _diff(f"sqlite:///{tmp_path / 'empty.db'}") != []


def _fresh_url(database_url: str, tmp_path) -> tuple[str, str | None]:
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'fresh.db'}", None
    admin = os.environ["TEST_DATABASE_URL"]
    return create_postgres_database(admin), admin


def test_downgrade_to_base_and_upgrade_again(database_url, tmp_path):
    url, admin = _fresh_url(database_url, tmp_path)
    try:
        upgrade_to_head(url)
        engine = make_engine(url)
        with engine.begin() as conn:
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        engine.dispose()
        upgrade_to_head(url)
        assert _diff(url) == []
    finally:
        if admin:
            drop_postgres_database(admin, url)


def test_msvmav_migrate_works_from_any_directory(database_url, tmp_path):
    url, admin = _fresh_url(database_url, tmp_path)
    try:
        env = {**os.environ, "MSVMAV_DATABASE_URL": url}
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert _diff(url) == []
    finally:
        if admin:
            drop_postgres_database(admin, url)


def test_revision_0002_renames_the_algorithm_of_existing_models(database_url, tmp_path):
    from sqlalchemy import text

    url, admin = _fresh_url(database_url, tmp_path)
    try:
        engine = make_engine(url)
        with engine.begin() as conn:
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
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
        engine.dispose()
    finally:
        if admin:
            drop_postgres_database(admin, url)
