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
import threading
import weakref
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import Pool

import migrations

# __path__ rather than __file__: also right when "migrations" resolves as a namespace package.
MIGRATIONS_DIR = Path(next(iter(migrations.__path__))).resolve()
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option marking a connection whose transaction only reads (see begin_read).
READ_ONLY_OPTION = "msvmav_read_only"
# Pool-record flag: the SQLite connection is in PRAGMA query_only mode.
QUERY_ONLY_KEY = "msvmav_query_only"
# PostgreSQL connections an API or worker process keeps open, and may open beyond that at once;
# and those of the per-request reads' pool (fetch_one).
POOL_SIZE, POOL_OVERFLOW = 10, 30
READER_POOL_SIZE, READER_POOL_OVERFLOW = 8, 32

log = logging.getLogger("app.core.db")


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str) -> Engine:
    """Engine for ``url`` with our SQLite pragmas. PostgreSQL: connections are pinged when
    taken from the pool, and the pool keeps POOL_SIZE of them (an API process answers up to
    40 requests at once in its thread pool; a connection opened for one request and closed
    after it costs milliseconds)."""
    if not is_sqlite(url):
        return create_engine(
            url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW
        )
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
        # query_only makes a write in a read-only transaction fail at once and every time
        # ("attempt to write a readonly database"), instead of only when another process
        # happens to commit in between (a deferred transaction cannot upgrade safely). Set
        # when the mode changes, so a pooled connection writes again in its next write
        # transaction.
        info = conn.connection.info
        if read_only != info.get(QUERY_ONLY_KEY, False):
            conn.exec_driver_sql(f"PRAGMA query_only={'ON' if read_only else 'OFF'}")
            info[QUERY_ONLY_KEY] = read_only
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def read_only(engine: Engine) -> Engine:
    """``engine`` (same pool) whose every transaction is read-only, as after ``begin_read``:
    for sessions that only read (GET requests)."""
    return engine.execution_options(**{READ_ONLY_OPTION: True})


def begin_read(session: Session) -> None:
    """Open ``session``'s transaction as read-only: on SQLite a deferred ``BEGIN`` that does not
    take the write lock. Call it before the session's first statement, and never write in that
    transaction (a deferred transaction cannot safely upgrade to a write, see above); a no-op
    when the transaction has begun already. PostgreSQL transactions are unaffected."""
    if not session.in_transaction():
        session.connection(execution_options={READ_ONLY_OPTION: True})


# DBAPI placeholder of the drivers we ship: sqlite3 (qmark) and psycopg (pyformat).
_PLACEHOLDERS = {"qmark": "?", "pyformat": "%s"}
# The per-request reads' own engine for each server database (see _reader), by main pool.
_readers: weakref.WeakKeyDictionary[Pool, Engine] = weakref.WeakKeyDictionary()
_readers_lock = threading.Lock()


def placeholders(engine: Engine, sql: str) -> str:
    """``sql`` written with ``?`` placeholders, in the DBAPI placeholder style of ``engine``'s
    driver (for ``fetch_one`` and ``Connection.exec_driver_sql``)."""
    return sql.replace("?", _PLACEHOLDERS[engine.dialect.paramstyle])


def fetch_one(engine: Engine, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The first row of a read-only ``sql`` (positional placeholders written ``?``) as the
    driver returns it, or None: for the per-request checks (a model's row, an API key).

    Runs on a DBAPI connection without SQLAlchemy's statement machinery, which cost most of a
    warm /predict's time. SQLite: a pooled connection, in autocommit mode (see make_engine),
    so the SELECT is its own read transaction and never takes the write lock. A server
    database: a connection of the reader pool (``_reader``), one round trip per call instead
    of three."""
    reader = _reader(engine)
    statement = placeholders(engine, sql)
    for attempt in (1, 2):
        raw = reader.raw_connection()
        try:
            cur = raw.cursor()
            try:
                cur.execute(statement, params)
                row = cur.fetchone()
            finally:
                cur.close()
        except reader.dialect.loaded_dbapi.Error as exc:
            # Not pinged when taken: a connection the server dropped fails here, once.
            if attempt == 2 or not reader.dialect.is_disconnect(exc, raw.dbapi_connection, None):
                raise
            raw.invalidate()
            continue
        finally:
            raw.close()  # back to the pool
        return None if row is None else tuple(row)
    raise AssertionError("unreachable")


def _reader(engine: Engine) -> Engine:
    """``engine`` itself on SQLite; for a server database, a small second pool on the same URL
    whose connections are in autocommit mode (no transaction to roll back when one returns to
    the pool) and not pinged when taken (fetch_one retries a dropped one instead): the
    per-request read is one round trip instead of three."""
    if engine.dialect.name == "sqlite":
        return engine
    with _readers_lock:
        reader = _readers.get(engine.pool)
        if reader is None:
            reader = _readers[engine.pool] = create_engine(
                engine.url,
                isolation_level="AUTOCOMMIT",
                pool_size=READER_POOL_SIZE,
                max_overflow=READER_POOL_OVERFLOW,
            )
            # Closed with the main pool (Engine.dispose, e.g. at the API's shutdown).
            event.listen(engine, "engine_disposed", lambda _engine: reader.dispose())
        return reader


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
