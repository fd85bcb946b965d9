"""Idle workers woken when a job is queued (app/jobs/wakeup.py), against the real databases: on
PostgreSQL by NOTIFY, on SQLite by a read of the queue every PEEK_INTERVAL. A worker whose poll
interval is 30 s claims a new job within a second; a rolled-back enqueue wakes nobody; a stop
ends a wait; a listening connection the server drops is opened again; without a server the
wait is the plain poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.jobs import worker as worker_module
from app.jobs.orm import Job
from app.jobs.service import enqueue
from app.jobs.wakeup import PEEK_INTERVAL, STOP_CHECK, Wakeup, announce
from app.jobs.worker import Worker


def postgresql_only(engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("notifications are PostgreSQL's")


@pytest.fixture
def waiting(engine) -> Iterator[tuple[Wakeup, threading.Event]]:
    """A Wakeup that has waited once (on PostgreSQL: it is listening) and its stop event;
    closed afterwards."""
    wakeup, stop = Wakeup(engine), threading.Event()
    assert wakeup.wait(0.05, stop) is False  # nothing queued
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


class RanWorker(Worker):
    """A worker that says, by an event, when it has run a job (events, not polling)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.ran = threading.Event()

    def run_once(self) -> str | None:
        status = super().run_once()
        if status is not None:
            self.ran.set()
        return status


def test_a_queued_job_wakes_an_idle_worker_long_before_its_poll(settings, engine):
    worker = RanWorker(settings.model_copy(update={"worker_poll_interval": 30.0}), engine=engine)
    thread = threading.Thread(target=worker.run_forever)
    thread.start()
    try:
        # idle in its 30 s wait (on PostgreSQL, listening)
        assert worker.wakeup.waiting.wait(10)
        if engine.dialect.name == "postgresql":
            assert worker.wakeup.listening.wait(10)
        start = time.monotonic()
        job_id = queue_job(engine)
        assert worker.ran.wait(5)
        assert status(engine, job_id) != "queued"
        assert time.monotonic() - start < 5  # without the wake-up: 30 s
        assert worker.wakeup.woken >= 1
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert worker.wakeup.conn is None  # closed when the worker stopped


def test_a_rolled_back_enqueue_wakes_nobody(engine, waiting):
    wakeup, stop = waiting
    queue_job(engine, commit=False)
    assert wakeup.wait(0.5, stop) is False
    queue_job(engine)
    start = time.monotonic()
    assert wakeup.wait(5, stop) is True
    assert time.monotonic() - start < 1 + PEEK_INTERVAL
    assert wakeup.woken == 1


def test_a_listening_connection_the_server_drops_is_opened_again(engine, waiting):
    postgresql_only(engine)
    wakeup, stop = waiting
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


def test_a_stop_ends_a_wait(waiting):
    wakeup, stop = waiting
    threading.Timer(0.2, stop.set).start()
    start = time.monotonic()
    assert wakeup.wait(30, stop) is False
    assert time.monotonic() - start < 0.2 + 2 * max(STOP_CHECK, PEEK_INTERVAL) + 0.5


def test_an_unreachable_database_waits_the_plain_poll(engine, tmp_path):
    stop = threading.Event()
    for url in ("postgresql+psycopg://postgres@127.0.0.1:9/none",
                f"sqlite:///{tmp_path}/missing/dir/jobs.db"):
        unreachable = make_engine(url)
        wakeup = Wakeup(unreachable)
        start = time.monotonic()
        assert wakeup.wait(0.3, stop) is False
        assert 0.25 < time.monotonic() - start < 3
        assert wakeup.conn is None
        unreachable.dispose()
    if engine.dialect.name == "sqlite":  # announcing sends nothing there
        with Session(engine) as session:
            announce(session)


def test_a_failing_claim_waits_out_its_backoff_though_a_job_is_queued(settings, engine,
                                                                       monkeypatch):
    """A queued job would end every wait at once; a worker whose claim fails (a bug, say) still
    tries once per poll interval, not at the wake-up's pace."""
    calls, three = [], threading.Event()

    def failing(*_args):
        calls.append(time.monotonic())
        if len(calls) >= 3:
            three.set()
        raise RuntimeError("claim failed")

    monkeypatch.setattr(worker_module, "claim_next_job", failing)
    queue_job(engine)
    worker = Worker(settings.model_copy(update={"worker_poll_interval": 0.5}), engine=engine)
    thread = threading.Thread(target=worker.run_forever)
    thread.start()
    try:
        assert three.wait(10)
    finally:
        worker.stop()
        thread.join(10)
    gaps = np.diff(calls[:3])
    # ~every 0.5 s; with the wake-ups it was every 0.1 s or less
    assert (gaps > 0.4).all(), gaps
    assert worker.wakeup.woken == 0
