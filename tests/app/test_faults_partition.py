"""Issue 45: a worker cut off from the database while the other workers' reapers reach it.
On a PostgreSQL server of the test's own (initdb + pg_ctl), one worker reaches it through a
real TCP proxy of the test's, which the test cuts (every connection closed, new ones refused)
while the API and the reaper reach the server directly. The cut-off worker cannot renew its
lease; once it has not for a lease (app.jobs.runtime.Lease) its job holds still: no fit
callback, so no computation and no side effect goes on beside the reaper's re-queue and the
next claimant. When the proxy is restored the worker learns the job is no longer its own and
drops it ("lost"): no model written, the attempt recorded lost, the new claimant's."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import make_engine, upgrade_to_head
from app.jobs import runtime as job_runtime
from app.jobs.orm import Job, JobAttempt
from app.jobs.queue import claim_next_job, reap_expired_jobs
from app.jobs.worker import Worker
from app.main import create_app, shut_down
from app.models.orm import Model
from tests.app.faults_support import have_postgres_binaries, postgres_server
from tests.app.support import blobs, to_csv, wait_for

pytestmark = [
    pytest.mark.postgres,  # a PostgreSQL server of its own (initdb, pg_ctl)
    pytest.mark.skipif(
        not have_postgres_binaries(), reason="PostgreSQL 15 binaries (initdb, pg_ctl) not installed"
    ),
]

LEASE = 2.0


class Proxy:
    """A TCP proxy from a free port of 127.0.0.1 to ``port``: ``cut`` closes every connection
    and refuses new ones (accepted and closed at once) until ``restore``."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.is_cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.is_cut:
                    client.close()
                    continue
                upstream = socket.create_connection(("127.0.0.1", self.target))
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            self.is_cut = True
            for s in self.open:
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.open.clear()

    def restore(self) -> None:
        with self.lock:
            self.is_cut = False

    def close(self) -> None:
        self.cut()
        self.listener.close()


@contextmanager
def proxied(port: int) -> Iterator[Proxy]:
    proxy = Proxy(port)
    try:
        yield proxy
    finally:
        proxy.close()


class Held:
    """Instrumentation of the worker's fit callback (app.jobs.runtime.ProgressReporter.due):
    when each call came, and an event set when a job starts holding still."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[float] = []
        self.holding = threading.Event()
        due, hold = job_runtime.ProgressReporter.due, job_runtime.ProgressReporter.__dict__.get(
            "_hold_until_confirmed")

        def counted_due(reporter) -> bool:
            self.calls.append(time.monotonic())
            return due(reporter)

        monkeypatch.setattr(job_runtime.ProgressReporter, "due", counted_due)
        if hold is not None:
            def noted_hold(reporter) -> None:
                self.holding.set()
                return hold(reporter)

            monkeypatch.setattr(job_runtime.ProgressReporter, "_hold_until_confirmed",
                                noted_hold)


def _attempts(engine, job_id: int) -> list[str]:
    with Session(engine) as s:
        return list(s.scalars(select(JobAttempt.outcome).where(JobAttempt.job_id == job_id)
                              .order_by(JobAttempt.number)))


def test_a_worker_cut_off_from_the_database_holds_its_job_and_drops_it_once_reaped(
        tmp_path, monkeypatch):
    held = Held(monkeypatch)
    with postgres_server() as pg, proxied(pg.port) as proxy:
        upgrade_to_head(pg.url)
        engine = make_engine(pg.url)
        api = create_app(Settings(database_url=pg.url, lease_seconds=LEASE,
                                  heartbeat_interval=0.3, _env_file=None))
        cut_off = Worker(Settings(
            database_url=pg.url.replace(f":{pg.port}/", f":{proxy.port}/"), lease_seconds=LEASE,
            heartbeat_interval=0.3, cancel_check_interval=0.05, worker_poll_interval=0.05,
            _env_file=None))
        try:
            with TestClient(api) as c:
                ds = c.post("/datasets", files={"file": ("d.csv", to_csv(*blobs(n=120)))})
                # stop='step', tol 0: the fit runs all its iterations (minutes), ended by the test
                job = c.post("/train", json={"dataset_id": ds.json()["id"], "tol": 0,
                                             "stop": "step", "max_iter": 1_000_000,
                                             "calibration": "none"})
                assert job.status_code == 202, job.text
                job_id = job.json()["id"]
            ended: list[str | None] = []
            runner = threading.Thread(target=lambda: ended.append(cut_off.run_once()))
            runner.start()
            wait_for(lambda: len(held.calls) > 10, timeout=120, interval=0.05)
            proxy.cut()
            # the reaper, reaching the server, takes the job once its lease has expired
            wait_for(lambda: reap_expired_jobs(engine, LEASE, 3) == 1, timeout=60,
                     interval=0.1)
            assert held.holding.wait(timeout=30), "the cut-off worker's job did not hold still"
            held_at = len(held.calls)
            assert claim_next_job(engine, "next-claimant") == job_id  # the next claimant's
            assert runner.is_alive() and len(held.calls) == held_at  # still holding, no work
            proxy.restore()
            runner.join(timeout=60)
            assert not runner.is_alive() and ended == ["lost"], ended
            assert len(held.calls) == held_at  # it did not go on with the fit
            with Session(engine) as s:
                row = s.get(Job, job_id)
                assert (row.status, row.worker_id, row.attempts) == ("running", "next-claimant", 2)
                assert s.scalar(select(func.count()).select_from(Model)) == 0
            assert _attempts(engine, job_id) == ["lost", "running"]
        finally:
            cut_off.runtime.engine.dispose()
            shut_down(api)
            engine.dispose()
