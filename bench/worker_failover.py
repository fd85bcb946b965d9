"""Worker fail-over benchmark: how long a job whose worker is SIGKILLed takes to be re-queued
and to succeed on another worker, with the default lease settings, on PostgreSQL.

    TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python bench/worker_failover.py [--trials 3]

Per trial: a fresh job (3000 × 40, max_iter 12000, tol 0: a fit of a few seconds) is claimed
by worker A (``msvmav worker``, default settings: heartbeat every MSVMAV_HEARTBEAT_INTERVAL =
2.5 s, lease MSVMAV_LEASE_SECONDS = 10 s); once it has reported progress, an idle worker B is
running and A gets SIGKILL. Measured from the kill (wall clock, the timestamps the database
holds): **re-queued** = when the reaper ended A's attempt ``lost``; **succeeded** = the job's
``finished_at``. Anchors from the same run: the lease (re-queue can take at most lease +
one reap interval (1 s) after A's last heartbeat) and the job's own run time on B (attempt 2), so
``succeeded - re-queued - run on B`` is the time B took to claim it.

Runs in a scratch database created next to TEST_DATABASE_URL's and dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.config import Settings  # noqa: E402
from app.core.db import upgrade_to_head  # noqa: E402
from app.main import create_app  # noqa: E402
from tests.app.support import (  # noqa: E402
    blobs,
    create_postgres_database,
    drop_postgres_database,
    job_finished,
    start_worker_process,
    to_csv,
    wait_for,
)


def start_worker(url: str, workdir: str, name: str) -> subprocess.Popen:
    """A worker with the deployed defaults (no MSVMAV_* of this process) and its alive file."""
    alive = {"MSVMAV_WORKER_ALIVE_FILE": f"{workdir}/alive-{name}"}
    return start_worker_process(url, workdir, env=alive, deployed_defaults=True, capture=False)


def iso_seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def trial(client: TestClient, url: str, workdir: str, dataset_id: int) -> dict[str, float]:
    r = client.post("/train", json={"dataset_id": dataset_id, "max_iter": 12_000, "tol": 0})
    job_id = r.json()["id"]
    a = start_worker(url, workdir, f"a-{job_id}")
    b = None
    try:

        def running_on_a() -> bool:
            body = client.get(f"/jobs/{job_id}").json()
            return (
                body["status"] == "running"
                and body["progress"] > 0
                and f":{a.pid}:" in (body["worker_id"] or "")
            )

        wait_for(running_on_a, timeout=120)
        b = start_worker(url, workdir, f"b-{job_id}")
        wait_for(lambda: Path(f"{workdir}/alive-b-{job_id}").exists(), timeout=120)  # B polls
        a.send_signal(signal.SIGKILL)
        a.wait()
        killed = time.time()
        body = job_finished(client, job_id, timeout=300)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)
    assert body["status"] == "succeeded", body
    lost, done = body["attempt_history"]
    assert lost["outcome"] == "lost" and done["outcome"] == "succeeded", body
    return {
        "requeued": iso_seconds(lost["finished_at"]) - killed,
        "succeeded": iso_seconds(body["finished_at"]) - killed,
        "run_on_b": iso_seconds(done["finished_at"]) - iso_seconds(done["started_at"]),
        "claim_gap": iso_seconds(done["started_at"]) - iso_seconds(lost["finished_at"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    admin = os.environ.get("TEST_DATABASE_URL")
    if not admin:
        print("set TEST_DATABASE_URL to a PostgreSQL URL (the bench creates its own database)")
        return 2
    url = create_postgres_database(admin)
    defaults = Settings(_env_file=None)
    try:
        upgrade_to_head(url)
        settings = Settings(database_url=url, _env_file=None)
        with tempfile.TemporaryDirectory() as workdir, TestClient(create_app(settings)) as client:
            r = client.post(
                "/datasets",
                files={"file": ("bench.csv", to_csv(*blobs(n=3000, d=40, seed=1, shift=0.3)))},
            )
            dataset_id = r.json()["id"]
            rows = [trial(client, url, workdir, dataset_id) for _ in range(args.trials)]
    finally:
        drop_postgres_database(admin, url)
    print(
        f"PostgreSQL, defaults: heartbeat {defaults.heartbeat_interval:g} s, "
        f"lease {defaults.lease_seconds:g} s, {args.trials} trials (SIGKILL of the worker)"
    )
    print(f"{'trial':>5} {'re-queued s':>12} {'succeeded s':>12} {'run on B s':>11} {'claim s':>8}")
    for i, row in enumerate(rows, 1):
        print(
            f"{i:>5} {row['requeued']:>12.2f} {row['succeeded']:>12.2f} "
            f"{row['run_on_b']:>11.2f} {row['claim_gap']:>8.2f}"
        )
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    # A's last heartbeat is at or before the kill; an idle worker reaps once a second.
    bound = (
        defaults.lease_seconds + min(1.0, defaults.heartbeat_interval)
    ) / defaults.lease_seconds
    print(
        f"median: re-queued {med['requeued']:.2f} s after the kill = "
        f"{med['requeued'] / defaults.lease_seconds:.2f} × the lease (bound: "
        f"{bound:.2f} ×); "
        f"succeeded {med['succeeded']:.2f} s after the kill = re-queue + "
        f"{med['claim_gap']:.2f} s claim + {med['run_on_b']:.2f} s run "
        f"({med['succeeded'] / med['run_on_b']:.2f} × the job's own run time)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
