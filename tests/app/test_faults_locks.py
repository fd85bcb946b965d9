"""Issue 15, point 7: a worker frozen inside a transaction that holds its job's row lock
(SIGSTOPped between its progress UPDATE and the COMMIT: ``idle in transaction``).

PostgreSQL only (SQLite has one write lock per file, see docs/jobs.md): the API's
``lock_timeout`` makes ``POST /jobs/{id}/cancel`` answer 503 with Retry-After within about a
second instead of hanging, and the worker's ``idle_in_transaction_session_timeout`` (its lease)
makes the server end the frozen transaction, so the lock goes, the job is re-queued by the
reaper, and the cancel then goes through."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.core.db import is_sqlite, make_engine, worker_limits
from app.jobs.worker import Worker, claim_next_job
from app.main import create_app
from tests.app.support import assert_problem, blobs, submit, to_csv, upload, wait_for


def test_cancel_does_not_wait_for_a_frozen_workers_row_lock(settings, engine):
    if is_sqlite(settings.database_url):
        pytest.skip("PostgreSQL row locks and session timeouts")
    settings = settings.model_copy(update={"lease_seconds": 3.0, "heartbeat_interval": 0.5})
    with TestClient(create_app(settings)) as client:
        job_id = submit(client, upload(client, to_csv(*blobs()))["id"])["id"]
        assert claim_next_job(engine, "frozen-worker") == job_id
        frozen = make_engine(settings.database_url, worker_limits(settings))
        conn = frozen.connect()
        thread = threading.Thread()
        try:
            conn.begin()
            conn.execute(text("UPDATE jobs SET progress = 0.5 WHERE id = :id"), {"id": job_id})
            answers: list = []
            started = time.monotonic()
            thread = threading.Thread(
                target=lambda: answers.append(client.post(f"/jobs/{job_id}/cancel"))
            )
            thread.start()
            thread.join(timeout=10)
            elapsed = time.monotonic() - started
            assert answers, "POST /jobs/{id}/cancel waited for the frozen worker's row lock"
            body = assert_problem(answers[0], 503)
            assert answers[0].headers["Retry-After"] and "locked" in body["detail"], body
            assert elapsed < 5, elapsed
            # The server ends the frozen transaction after the lease: the lock goes and the
            # job is re-queued by any worker's reaper.
            reaper = Worker(settings, engine=engine)
            wait_for(
                lambda: reaper.reap() or client.get(f"/jobs/{job_id}").json()["status"] == "queued",
                timeout=30,
                interval=0.3,
            )
            r = client.post(f"/jobs/{job_id}/cancel")
            assert r.status_code in (200, 202), r.text
            assert client.get(f"/jobs/{job_id}").json()["status"] == "cancelled"
        finally:
            with contextlib.suppress(SQLAlchemyError):  # the server ended it already
                conn.close()
            frozen.dispose()
            if thread.ident is not None:
                thread.join(timeout=60)
