"""Idle workers woken when a job is queued, instead of finding it at their next look.

On PostgreSQL, whatever puts a job in the queue (``announce``: a new job, a job put back by a
worker that shut down or by the reaper) also sends ``NOTIFY msvmav_jobs`` in the same
transaction, which the server delivers when that transaction commits. An idle worker
(``Wakeup``) listens on that channel on a connection of its own and looks for a job as soon as
one is announced; it still looks every ``worker_poll_interval`` seconds, so a notification lost
with its connection delays a job by at most that (the listening connection is opened again at
the next wait). SQLite has no notifications: there an idle worker reads whether a job is
queued every PEEK_INTERVAL seconds (one lookup in the jobs' status index, in WAL mode a read
that takes no lock a writer waits for) and claims it when one is; the claim itself, a write
transaction, is still made once per ``worker_poll_interval`` at most when nothing is queued.

Measured with ``bench/train_job.py`` (one worker, 1,000,000 x 28, 3 rounds): a job waited
0.01-0.97 s in the queue before (the poll's phase); after, 0.00 s on PostgreSQL and 0.02-0.08 s
on SQLite; see docs/performance.md.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time

import psycopg
from sqlalchemy import Connection, Engine, func
from sqlalchemy import select as sql_select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.jobs.orm import Job

log = logging.getLogger("app.jobs.wakeup")

CHANNEL = "msvmav_jobs"
# A waiting worker looks at its stop event at least this often (seconds).
STOP_CHECK = 0.25
# Seconds to open the listening connection before falling back to the plain wait.
CONNECT_TIMEOUT = 2
# SQLite: an idle worker reads whether a job is queued this often (seconds).
PEEK_INTERVAL = 0.1


def announce(db: Session | Connection) -> None:
    """Tell idle workers a job is queued: PostgreSQL's NOTIFY on CHANNEL, sent when ``db``'s
    transaction commits (and not at all if it rolls back); nothing on other databases."""
    bind = db.get_bind() if isinstance(db, Session) else db
    if bind.dialect.name == "postgresql":
        db.execute(sql_select(func.pg_notify(CHANNEL, "")))


class Wakeup:
    """An idle worker's wait on ``engine``'s database: until a job is announced (PostgreSQL)
    or seen queued (SQLite, every PEEK_INTERVAL), its stop event is set, or the given seconds
    have passed. ``woken`` counts the waits a queued job ended."""

    def __init__(self, engine: Engine) -> None:
        url = engine.url
        self.engine = engine
        self.conninfo = (url.set(drivername="postgresql").render_as_string(hide_password=False)
                         if url.get_backend_name() == "postgresql" else None)
        self.conn: psycopg.Connection | None = None
        self.announced = threading.Event()
        self.woken = 0
        self.waiting = threading.Event()  # set while a wait is under way (what tests wait on)
        self.listening = threading.Event()  # set once a LISTEN is in place (tests wait on it)

    def wait(self, seconds: float, stop: threading.Event) -> bool:
        """Wait; True when a queued job ended the wait."""
        deadline = time.monotonic() + seconds
        self.waiting.set()
        try:
            if self.conninfo is None:
                woken = self._peek_until(deadline, stop)
            else:
                woken = self._listen_until(deadline, stop)
        finally:
            self.waiting.clear()
        self.woken += woken
        return woken

    def _peek_until(self, deadline: float, stop: threading.Event) -> bool:
        while not stop.wait(max(0.0, min(PEEK_INTERVAL, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return False
            if self._queued():
                return True
        return False

    def _queued(self) -> bool:
        """Whether a job is queued (False when the database cannot say: the worker's own
        claim reports an outage)."""
        try:
            with self.engine.connect() as conn:
                return conn.scalar(
                    sql_select(Job.id).where(Job.status == "queued").limit(1)) is not None
        except SQLAlchemyError:
            return False

    def _listen_until(self, deadline: float, stop: threading.Event) -> bool:
        try:
            return self._notified_before(deadline, stop)
        except (psycopg.Error, OSError) as exc:  # the server went away: wait out the rest
            log.debug("job notifications unavailable (%s); polling", type(exc).__name__)
            self.close()
            stop.wait(max(0.0, deadline - time.monotonic()))
            return False

    def _notified_before(self, deadline: float, stop: threading.Event) -> bool:
        conn = self._listening()
        while not stop.is_set():
            if self.announced.is_set():
                self.announced.clear()
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([conn.fileno()], [], [], min(left, STOP_CHECK))
            if ready:
                conn.execute("SELECT 1")  # reads what arrived: the handler sees each NOTIFY
        return False

    def _listening(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            conn = psycopg.connect(self.conninfo, autocommit=True,
                                   connect_timeout=CONNECT_TIMEOUT)
            conn.add_notify_handler(lambda _notify: self.announced.set())
            conn.execute(f"LISTEN {CHANNEL}")
            self.conn = conn
            self.listening.set()
        return self.conn

    def close(self) -> None:
        """Close the listening connection (a later wait opens another)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):  # a broken connection
                conn.close()
