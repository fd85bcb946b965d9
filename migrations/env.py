"""Alembic environment. The URL comes from, in order: a connection handed over in
``config.attributes["connection"]`` (app.core.db.upgrade_to_head, tests), ``sqlalchemy.url`` in the
config, or the service settings (``MSVMAV_DATABASE_URL``)."""

from __future__ import annotations

from alembic import context

from app.core.db import make_engine
from app.tables import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from app.core.config import Settings

    return Settings().database_url


def _run_migrations_on(connection) -> None:  # noqa: ANN001
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_migrations_on(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run_migrations_on(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
