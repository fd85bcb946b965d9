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

import errno
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

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
# POOL_SIZE + POOL_OVERFLOW is the size of the API's thread pool (AnyIO's default of 40), for
# SQLite too: a request waiting in a thread for a connection can always get one.
POOL_SIZE, POOL_OVERFLOW = 10, 30
READER_POOL_SIZE, READER_POOL_OVERFLOW = 8, 32

log = logging.getLogger("app.core.db")


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str, limits: dict[str, float] | None = None) -> Engine:
    """Engine for ``url`` with our SQLite pragmas. PostgreSQL: connections are pinged when
    taken from the pool (a connection the server dropped, in a restart say, is replaced
    without the request noticing), and the pool keeps POOL_SIZE of them (an API process
    answers up to 40 requests at once in its thread pool; a connection opened for one request
    and closed after it costs milliseconds). ``limits``: PostgreSQL settings in seconds
    (``lock_timeout``, ``statement_timeout``, ``idle_in_transaction_session_timeout``) every
    connection of the engine starts with (see ``api_limits``, ``worker_limits``)."""
    if not is_sqlite(url):
        options = " ".join(
            f"-c {name}={round(seconds * 1000)}" for name, seconds in (limits or {}).items()
        )
        return create_engine(
            url,
            pool_pre_ping=True,
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
            connect_args={"options": options} if options else {},
        )
    # A file database gets a queue pool of the thread pool's size; an in-memory one keeps
    # SQLAlchemy's own pool (one connection), which takes no sizes.
    in_memory = make_url(url).database in (None, "", ":memory:")
    sizes = {} if in_memory else {"pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW}
    engine = create_engine(
        url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **sizes
    )

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


def api_limits(settings: Any) -> dict[str, float]:
    """PostgreSQL limits of the API's connections (``settings``: app.core.config.Settings): no
    transaction waits longer than ``db_lock_timeout`` for a row lock (a frozen worker's, say),
    nor runs a statement, or stays open and idle, longer than ``db_statement_timeout``."""
    return {
        "lock_timeout": settings.db_lock_timeout,
        "statement_timeout": settings.db_statement_timeout,
        "idle_in_transaction_session_timeout": settings.db_statement_timeout,
    }


def worker_limits(settings: Any) -> dict[str, float]:
    """PostgreSQL limits of a worker's connections: a transaction left open and idle for
    longer than the lease (the worker frozen inside it, by SIGSTOP say) is ended by the server,
    so that its row locks go when its lease does, and the job can be re-queued and cancelled."""
    return {"idle_in_transaction_session_timeout": settings.lease_seconds}


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


def placeholders(engine: Engine, sql: str) -> str:
    """``sql`` written with ``?`` placeholders, in the DBAPI placeholder style of ``engine``'s
    driver (for ``fetch_one`` and ``Connection.exec_driver_sql``)."""
    return sql.replace("?", _PLACEHOLDERS[engine.dialect.paramstyle])


def fetch_one(reader: Engine, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The first row of a read-only ``sql`` (positional placeholders written ``?``) as the
    driver returns it, or None: for the per-request checks (a model's row, an API key).

    Runs on a DBAPI connection of ``reader``, the reader pool (``reader_engine``; a
    runtime's ``app.core.runtime.Runtime.reader``), without SQLAlchemy's statement
    machinery, which cost most of a warm /predict's time: never on a connection of the pool the
    requests' sessions use, so a key check cannot wait for one of them. Connections are in
    autocommit mode (the SELECT is its own read transaction and never takes SQLite's write
    lock) and not pinged when taken: one round trip per call. A connection the server dropped
    (a restart) fails here: the reader pool is then emptied, every connection in it being as
    old, and the read is tried once more on a new connection."""
    statement = placeholders(reader, sql)
    dbapi_error = reader.dialect.loaded_dbapi.Error
    for attempt in (1, 2):
        try:
            raw = reader.raw_connection()  # the pool raises the driver's own errors
        except dbapi_error as exc:
            raise _wrapped(reader, statement, params, exc) from exc
        try:
            cur = raw.cursor()
            try:
                cur.execute(statement, params)
                row = cur.fetchone()
            finally:
                cur.close()
        except dbapi_error as exc:
            dropped = reader.dialect.is_disconnect(exc, raw.dbapi_connection, None)
            if attempt == 2 or not dropped:
                raise _wrapped(reader, statement, params, exc, dropped) from exc
            raw.invalidate()
            reader.pool.dispose()  # the other pooled connections predate the drop too
            continue
        finally:
            raw.close()  # back to the pool
        return None if row is None else tuple(row)
    raise AssertionError("unreachable")


def _wrapped(
    reader: Engine, statement: str, params: Any, exc: Exception, dropped: bool = False
) -> DBAPIError:
    """The driver's ``exc`` as SQLAlchemy's own statements raise it (OperationalError, ...):
    the handlers that answer 503 for a database that is away know those."""
    return DBAPIError.instance(
        statement,
        params,
        exc,
        reader.dialect.loaded_dbapi.Error,
        connection_invalidated=dropped,
        dialect=reader.dialect,
    )


def reader_engine(engine: Engine) -> Engine:
    """A small second pool on ``engine``'s URL for ``fetch_one``: SQLite connections with our
    pragmas, in autocommit mode (see make_engine); server connections in autocommit mode (no
    transaction to roll back when one returns to the pool). Disposed with ``engine``
    (Engine.dispose); its owner (app.core.runtime.Runtime) makes one per database."""
    url = engine.url.render_as_string(hide_password=False)
    reader = (
        make_engine(url)
        if engine.dialect.name == "sqlite"
        else create_engine(
            engine.url,
            isolation_level="AUTOCOMMIT",
            pool_size=READER_POOL_SIZE,
            max_overflow=READER_POOL_OVERFLOW,
        )
    )
    event.listen(engine, "engine_disposed", lambda _engine: reader.dispose())
    return reader


# --- faults -------------------------------------------------------------------------------------

# PostgreSQL SQLSTATE classes and codes of a database that is away or busy, not of a wrong
# request: connection exceptions (08), insufficient resources (53), operator intervention
# (57: shutdown, statement_timeout), lock_not_available (55P03: lock_timeout), transaction
# rollbacks (40: serialization failure, deadlock), idle_in_transaction_session_timeout (25P03).
_PG_TRANSIENT_CLASSES = ("08", "53", "57", "40")
_PG_TRANSIENT_CODES = ("55P03", "25P03")
_PG_DISK_FULL = "53100"
_SQLITE_FULL = 13  # SQLITE_FULL: "database or disk is full"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


@dataclass(frozen=True)
class DatabaseFault:
    """A fault of the database or the disk, not of the request: ``status`` 503 (away, busy,
    locked: retry later) or 507 (out of space), ``reason`` a short text without SQL."""

    status: int
    reason: str


def classify_fault(exc: BaseException) -> DatabaseFault | None:
    """The DatabaseFault ``exc`` stands for, or None for any other error (a bug: 500)."""
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
        return DatabaseFault(507, "no space left on the server's disk")
    if isinstance(exc, PoolTimeoutError):
        return DatabaseFault(503, "every database connection is busy")
    if isinstance(exc, DisconnectionError):
        return DatabaseFault(503, "the database connection was lost")
    if not isinstance(exc, DBAPIError):
        return None
    orig = exc.orig
    if isinstance(orig, sqlite3.Error):
        return _sqlite_fault(orig)
    code = getattr(orig, "sqlstate", None) or ""
    if code == _PG_DISK_FULL:
        return DatabaseFault(507, "the database server's disk is full")
    if code.startswith(_PG_TRANSIENT_CLASSES) or code in _PG_TRANSIENT_CODES:
        return DatabaseFault(503, _pg_reason(code))
    if exc.connection_invalidated or (not code and exc.__class__.__name__ in _AWAY_ERRORS):
        return DatabaseFault(503, "the database is unreachable")
    return None


_AWAY_ERRORS = ("OperationalError", "InterfaceError")


def _pg_reason(code: str) -> str:
    if code == "55P03":
        return "a row this request needs is locked by another transaction"
    if code == "57014":
        return "the statement took longer than its time limit"
    if code.startswith("40"):
        return "the transaction conflicted with another one"
    return "the database is unavailable"


def _sqlite_fault(orig: sqlite3.Error) -> DatabaseFault | None:
    if getattr(orig, "sqlite_errorcode", None) == _SQLITE_FULL or "disk is full" in str(orig):
        return DatabaseFault(507, "the database file's disk (or size limit) is full")
    text = str(orig)
    if isinstance(orig, sqlite3.OperationalError) and (
        "locked" in text or "disk I/O" in text or "unable to open" in text
    ):
        return DatabaseFault(503, "the database file is busy or unreadable")
    return None


def is_transient(exc: BaseException) -> bool:
    """A fault that may go away by itself (the database is away, busy or locked): a worker
    retries the operation instead of failing the job."""
    fault = classify_fault(exc)
    return fault is not None and fault.status == 503


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


def schema_behind(engine: Engine) -> str | None:
    """None when ``engine``'s database is at the code's migration head (or at a revision this
    code does not know: a newer one, migrated by newer code); otherwise one line saying where
    it is and what to run. Raises SQLAlchemyError when the database is unreachable."""
    url = engine.url.render_as_string(hide_password=False)
    heads = script_heads(url)
    current = current_heads(engine)
    if current == heads:
        return None
    script = ScriptDirectory.from_config(alembic_config(url))
    known = {rev.revision for rev in script.walk_revisions()}
    if current and not current <= known:
        log.warning(
            "database at revision %s, unknown to this code (head %s): newer code migrated it",
            ",".join(sorted(current)),
            ",".join(sorted(heads)),
        )
        return None
    return (
        f"database schema at revision {','.join(sorted(current)) or 'none (empty)'}, this code "
        f"needs {','.join(sorted(heads))}: run `msvmav migrate` first"
    )


def schema_refusal(engine: Engine) -> str | None:
    """Why a worker or the API must not start on ``engine``'s database: its schema is older
    than this code's migrations (``schema_behind``); None when it is at head, or unreachable
    (a worker waits for it, the API answers 503 until it is back)."""
    try:
        return schema_behind(engine)
    except SQLAlchemyError as exc:
        if not is_transient(exc):
            raise
        log.warning("schema not checked: database unavailable (%s)", type(exc).__name__)
        return None


# Backoff between two tries of a database operation while the database is away (seconds).
RETRY_FIRST, RETRY_MAX = 0.1, 2.0
T = TypeVar("T")


def with_retries(
    operation: Callable[[], T],
    what: str,
    patience: float,
    stop: threading.Event | None = None,
) -> T:
    """``operation()``, tried again with backoff (RETRY_FIRST doubling up to RETRY_MAX
    seconds) while it fails because the database is away, busy or locked
    (``app.core.db.is_transient``), for at most ``patience`` seconds; then, or at once for any
    other error, its exception. One log line per failed try, no traceback: a database blip is
    not a bug. ``stop`` set ends the waiting early (the worker is shutting down)."""
    deadline = time.monotonic() + patience
    delay = RETRY_FIRST
    while True:
        try:
            return operation()
        except SQLAlchemyError as exc:
            left = deadline - time.monotonic()
            if not is_transient(exc) or left <= 0:
                raise
            log.warning("%s: database unavailable (%s); retrying", what, type(exc).__name__)
            if stop is not None and stop.wait(min(delay, left)):
                raise
            if stop is None:
                time.sleep(min(delay, left))
            delay = min(2 * delay, RETRY_MAX)
