"""Idle workers woken by PostgreSQL's NOTIFY when a job is queued (app/jobs/wakeup.py), against
the real server: a worker whose poll interval is 30 s claims a new job within a second; a
rolled-back enqueue wakes nobody; a listening connection the server drops is opened again; on
SQLite (no notifications) and without a server, the wait is the plain poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app.jobs.orm import Job
from app.jobs.service import enqueue
from app.jobs.wakeup import STOP_CHECK, Wakeup, announce
from app.jobs.worker import Worker


def postgresql_only(engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("notifications are PostgreSQL's")


@pytest.fixture
def listening(engine) -> Iterator[tuple[Wakeup, threading.Event]]:
    """A Wakeup already listening (PostgreSQL only) and its stop event; closed afterwards."""
    postgresql_only(engine)
    wakeup, stop = Wakeup(engine.url), threading.Event()
    assert wakeup.wait(0.05, stop) is False  # now listening
    yield wakeup, stop
    wakeup.close()


def queue_job(engine, *, commit: bool = True) -> int:
    with Session(engine) as session:
        job = enqueue(session, kind="train", params={}, dataset_id=None)
        job_id = job.id
        if commit:
            session.commit()
        else:
            session.rollback()
    return job_id


def status(engine, job_id: int) -> str | None:
    with Session(engine) as session:
        return session.scalar(select(Job.status).where(Job.id == job_id))


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_a_queued_job_wakes_an_idle_worker_long_before_its_poll(settings, engine):
    postgresql_only(engine)
    worker = Worker(settings.model_copy(update={"worker_poll_interval": 30.0}), engine=engine)
    thread = threading.Thread(target=worker.run_forever)
    thread.start()
    try:
        # listening, and idle in its 30 s wait
        assert wait_for(lambda: worker.wakeup.conn is not None, 10)
        time.sleep(0.3)
        start = time.monotonic()
        job_id = queue_job(engine)
        assert wait_for(lambda: status(engine, job_id) != "queued", 5)
        assert time.monotonic() - start < 5  # without the notification: 30 s
        assert worker.wakeup.woken >= 1
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert worker.wakeup.conn is None  # closed when the worker stopped


def test_a_rolled_back_enqueue_wakes_nobody(engine, listening):
    wakeup, stop = listening
    queue_job(engine, commit=False)
    assert wakeup.wait(0.5, stop) is False
    queue_job(engine)
    assert wakeup.wait(5, stop) is True
    assert wakeup.woken == 1


def test_a_listening_connection_the_server_drops_is_opened_again(engine, listening):
    wakeup, stop = listening
    pid = wakeup.conn.info.backend_pid
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    start = time.monotonic()
    assert wakeup.wait(0.5, stop) is False  # the broken connection: the plain wait
    assert time.monotonic() - start < 2
    wakeup.wait(0.05, stop)  # listening again, on a new connection
    assert wakeup.conn is not None and wakeup.conn.info.backend_pid != pid
    queue_job(engine)
    assert wakeup.wait(5, stop) is True


def test_a_stop_ends_a_listening_wait(listening):
    wakeup, stop = listening
    threading.Timer(0.2, stop.set).start()
    start = time.monotonic()
    assert wakeup.wait(30, stop) is False
    assert time.monotonic() - start < 0.2 + 2 * STOP_CHECK + 0.5


def test_no_server_and_sqlite_wait_the_plain_poll(engine):
    unreachable = Wakeup(make_url("postgresql+psycopg://postgres@127.0.0.1:9/none"))
    stop = threading.Event()
    for wakeup in (unreachable, Wakeup(make_url("sqlite:///unused.db"))):
        start = time.monotonic()
        assert wakeup.wait(0.3, stop) is False
        assert 0.25 < time.monotonic() - start < 3
        assert wakeup.conn is None
    stop.set()
    start = time.monotonic()
    assert Wakeup(make_url("sqlite:///unused.db")).wait(30, stop) is False
    assert time.monotonic() - start < 1
    if engine.dialect.name == "sqlite":  # announcing sends nothing there
        with Session(engine) as session:
            announce(session)
