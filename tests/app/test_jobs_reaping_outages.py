"""Issue 45, in-process on either database: a worker that could not reach the database reaps no
lease for a lease's time after (the running workers could not renew theirs either), and
``release_dead_worker`` (what ``msvmav serve`` calls when an embedded worker dies) takes that
worker's job at once, counting the lost attempt, and nobody else's."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from app.core.orm import utcnow
from app.jobs.orm import Job
from app.jobs.queue import claim_next_job, release_dead_worker
from app.jobs.worker import Worker
from tests.app.support import blobs, submit, to_csv, upload, wait_for


def _expire(engine, job_id: int, seconds: float) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(heartbeat_at=utcnow() - timedelta(seconds=seconds))
        )


def test_a_worker_reaps_no_lease_for_a_lease_after_it_lost_the_database(
    client, engine, settings
):
    ds = upload(client, to_csv(*blobs(n=40)))
    job = submit(client, ds["id"], max_iter=20)
    assert claim_next_job(engine, "host:1:busy") == job["id"]
    _expire(engine, job["id"], seconds=60)
    reaper = Worker(
        settings.model_copy(update={"lease_seconds": 1.0, "heartbeat_interval": 0.5}),
        engine=engine,
    )
    reaper.database_lost()
    assert reaper.reap() == 0
    assert client.get(f"/jobs/{job['id']}").json()["status"] == "running"
    # once a lease has passed since, an expired lease is reaped again
    wait_for(reaper.reap, timeout=30, interval=0.1)
    assert client.get(f"/jobs/{job['id']}").json()["status"] == "queued"


def test_release_dead_worker_requeues_its_job_at_once_and_counts_the_loss(client, engine):
    ds = upload(client, to_csv(*blobs(n=40)))
    dead, alive = (submit(client, ds["id"], max_iter=20)["id"] for _ in range(2))
    assert claim_next_job(engine, "host:7:gone") == dead
    assert claim_next_job(engine, "host:8:here") == alive
    how = "process was killed by SIGKILL"
    assert release_dead_worker(engine, "host:7:gone", how, max_attempts=3) == 1
    body = client.get(f"/jobs/{dead}").json()
    assert body["status"] == "queued" and body["worker_id"] is None, body
    assert "killed by SIGKILL" in body["message"] and "lost 1 of at most 3" in body["message"]
    assert [a["outcome"] for a in body["attempt_history"]] == ["lost"]
    assert client.get(f"/jobs/{alive}").json()["status"] == "running"
    # at its max_attempts-th loss the job is failed, as when a lease expires
    assert claim_next_job(engine, "host:9:gone") == dead
    assert release_dead_worker(engine, "host:9:gone", how, max_attempts=2) == 1
    body = client.get(f"/jobs/{dead}").json()
    assert body["status"] == "failed" and "killed its worker 2 times" in body["error"], body
    assert "killed by SIGKILL" in body["error"]
    assert release_dead_worker(engine, "host:9:gone", how, max_attempts=2) == 0
