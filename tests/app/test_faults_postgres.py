"""Issue 15, points 2, 3 and 4 on a PostgreSQL server this test starts itself (initdb + pg_ctl
in a temporary directory), stops and starts again while a real API (``msvmav serve``) and a
real worker (``msvmav worker``) use it:

* while the server is down every database route answers 503 problem+json with Retry-After
  (never 500), with one log line per failure and no traceback; /livez stays 200;
* after each restart the service recovers by itself: the first keyed requests, ``POST /keys``
  included, succeed (no stale pooled connection answers 500);
* a job running through three 2-second outages finishes once: one attempt, one model (its
  worker kept the lease instead of being counted as killed).
"""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth import service as keys
from app.auth.keys import Scope
from app.core.db import make_engine, upgrade_to_head
from app.jobs.orm import JobAttempt
from app.models.orm import Model
from tests.app.faults_support import have_postgres_binaries, postgres_server, serve_api
from tests.app.support import blobs, start_worker_process, stop_workers, to_csv, wait_for
from tests.wait_support import hold_outage

pytestmark = [
    pytest.mark.postgres,  # a PostgreSQL server of its own (initdb, pg_ctl)
    pytest.mark.skipif(
        not have_postgres_binaries(), reason="PostgreSQL 15 binaries (initdb, pg_ctl) not installed"
    ),
]

OUTAGES, OUTAGE_SECONDS = 3, 2.0
WORKER_ENV = {
    "MSVMAV_WORKER_POLL_INTERVAL": "0.1",
    "MSVMAV_HEARTBEAT_INTERVAL": "0.5",
    "MSVMAV_LEASE_SECONDS": "6",
    "MSVMAV_CANCEL_CHECK_INTERVAL": "0.05",
}
# Long enough to run through the outages (a few tens of seconds on a loaded machine).
# one long fit (not a race), whose stopping rule cannot be met (an objective rule with tol 0 is:
# the linear iterate reaches an exact fixed point after ~560 iterations): ~30 s with its folds
LONG_FIT = {"max_iter": 200_000, "tol": 0, "stop": "step", "search": "none"}


def _during_outage(c: httpx.Client, job_id: int, upload: bytes) -> list[httpx.Response]:
    return [
        c.get("/datasets"),
        c.get(f"/jobs/{job_id}"),
        c.post("/datasets", files={"file": ("d.csv", upload)}),
        c.get("/models"),
    ]


def _assert_unavailable(r: httpx.Response) -> None:
    assert r.status_code == 503, (r.request.method, r.request.url, r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/problem+json")
    assert int(r.headers["Retry-After"]) > 0
    body = r.json()
    assert body["status"] == 503 and "retry" in body["detail"], body
    assert "SELECT" not in r.text and "127.0.0.1" not in r.text, r.text


def _outages(pg, api_url: str, c: httpx.Client, job_id: int, content: bytes) -> int:
    """Stop the server OUTAGES times for OUTAGE_SECONDS: 503s meanwhile, then recovery. The
    number of requests that failed (503)."""
    n_failed = 0
    for _ in range(OUTAGES):
        pg.stop()
        end = time.monotonic() + OUTAGE_SECONDS
        answers = _during_outage(c, job_id, content)
        assert httpx.get(api_url + "/livez").status_code == 200
        for r in answers:
            _assert_unavailable(r)
        n_failed += len(answers)
        hold_outage(max(0.0, end - time.monotonic()))
        pg.start()
        # Recovery without restart, and no stale pooled connection: the first keyed
        # requests after the restart all succeed, POST /keys included.
        for i in range(25):
            path = ("/datasets", f"/jobs/{job_id}", "/keys", "/models")[i % 4]
            r = c.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text)
        created = c.post("/keys", json={"name": "after-restart", "scope": "read"})
        assert created.status_code == 201, created.text
    return n_failed


def test_postgres_outages_answer_503_and_recover_and_the_job_finishes_once(tmp_path):
    content = to_csv(*blobs(n=120))
    with postgres_server() as pg:
        upgrade_to_head(pg.url)
        engine = make_engine(pg.url)
        with Session(engine) as session:
            _, admin = keys.create(session, "faults-admin", Scope.admin)
        headers = {"Authorization": f"Bearer {admin}"}
        worker = start_worker_process(pg.url, tmp_path, env=WORKER_ENV)
        try:
            with (
                serve_api(pg.url, tmp_path) as api,
                httpx.Client(base_url=api.url, headers=headers, timeout=30) as c,
            ):
                ds = c.post("/datasets", files={"file": ("d.csv", content)})
                assert ds.status_code == 201, ds.text
                job = c.post("/train", json={"dataset_id": ds.json()["id"], **LONG_FIT})
                assert job.status_code == 202, job.text
                job_id = job.json()["id"]
                wait_for(lambda: c.get(f"/jobs/{job_id}").json()["progress"] > 0, timeout=60)
                n_failed = _outages(pg, api.url, c, job_id, content)
                assert c.get(f"/jobs/{job_id}").json()["status"] == "running", (
                    "the job ended before the outages were over: make LONG_FIT longer"
                )
                final = wait_for(
                    lambda: (
                        (b := c.get(f"/jobs/{job_id}").json())["status"]
                        in ("succeeded", "failed", "cancelled")
                        and b
                    ),
                    timeout=240,
                    interval=0.2,
                )
                log = api.output()
        finally:
            worker_log = stop_workers([worker])[0]
        assert final["status"] == "succeeded", (final, worker_log[-3000:])
        assert final["attempts"] == 1, (final, worker_log[-3000:])
        with Session(engine) as session:
            outcomes = session.scalars(
                select(JobAttempt.outcome).where(JobAttempt.job_id == job_id)
            ).all()
            models = session.scalar(
                select(func.count()).select_from(Model).where(Model.job_id == job_id)
            )
        engine.dispose()
        assert outcomes == ["succeeded"] and models == 1, (outcomes, models)
        # One line per failed request, no traceback, in the API's log; none in the worker's.
        assert "Traceback" not in log, log[-4000:]
        assert log.count("logger=app.faults") >= n_failed, log[-4000:]
        assert " 500 " not in log and "status=500" not in log, log[-4000:]
        assert "Traceback" not in worker_log, worker_log[-4000:]
