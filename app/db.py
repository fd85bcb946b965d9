"""Engine, sessions and Alembic plumbing, identical for SQLite and PostgreSQL.

SQLite runs in WAL mode with a busy timeout and foreign keys on. A SQLite transaction starts
with ``BEGIN IMMEDIATE`` unless it was opened read-only (``begin_read``): the API and the worker
processes write to the same file, and a deferred transaction that reads and then writes fails at
once with "database is locked" when another process committed in between (the busy timeout does
not apply to that upgrade), whereas an immediate transaction simply waits its turn. Claims and
every other write keep ``BEGIN IMMEDIATE``; a read-only transaction (``/predict``) starts with a
plain deferred ``BEGIN``, so under WAL it reads a snapshot without queueing for the write lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

import migrations

# __path__ rather than __file__: also right when "migrations" resolves as a namespace package.
MIGRATIONS_DIR = Path(next(iter(migrations.__path__))).resolve()
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option marking a connection whose transaction only reads (see begin_read).
READ_ONLY_OPTION = "msvmav_read_only"

log = logging.getLogger("app.db")


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str) -> Engine:
    """Engine for ``url`` with our SQLite pragmas; PostgreSQL keeps SQLAlchemy's defaults."""
    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record):  # noqa: ANN001
        # Take transaction control away from pysqlite so that "begin" below is ours.
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn):  # noqa: ANN001
        read_only = conn.get_execution_options().get(READ_ONLY_OPTION, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def begin_read(session: Session) -> None:
    """Open ``session``'s transaction as read-only: on SQLite a deferred ``BEGIN`` that does not
    take the write lock. Call it before the session's first statement, and never write in that
    transaction (a deferred transaction cannot safely upgrade to a write, see above); a no-op
    when the transaction has begun already. PostgreSQL transactions are unaffected."""
    if not session.in_transaction():
        session.connection(execution_options={READ_ONLY_OPTION: True})


def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """Yield a session that is rolled back unless the caller committed (one per request)."""
    with factory() as session:
        try:
            yield session
        finally:
            session.rollback()


# --- Alembic -----------------------------------------------------------------------------------


def alembic_config(url: str, connection: Connection | None = None) -> Config:
    """Alembic configuration built in code, so ``msvmav migrate`` works from any directory.
    With ``connection``, commands run on it (in its transaction) instead of opening their own."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade_to_head(url: str) -> None:
    """Run ``alembic upgrade head`` against ``url``."""
    engine = make_engine(url)
    try:
        before = current_heads(engine)
        with engine.begin() as conn:
            command.upgrade(alembic_config(url, conn), "head")
        after = current_heads(engine)
    finally:
        engine.dispose()
    log.info(
        "database %s at revision %s (was %s)",
        make_url(url).render_as_string(hide_password=True),
        ",".join(sorted(after)) or "-",
        ",".join(sorted(before)) or "empty",
    )


def script_heads(url: str) -> set[str]:
    return set(ScriptDirectory.from_config(alembic_config(url)).get_heads())


def current_heads(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(MigrationContext.configure(conn).get_current_heads())


def ping(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
