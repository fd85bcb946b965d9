"""Batch scoring jobs run by real worker processes: one SIGKILLed mid-file, another resuming
from the last finished chunk, the result holding every row exactly once; a cancel mid-file (in
a worker thread of the test process)."""

from __future__ import annotations

import io
import signal

import numpy as np
import pandas as pd
from sqlalchemy import func, select

from app.batch.orm import BatchPart
from tests.app.support import (
    blobs,
    job_finished,
    running_job,
    start_worker_process,
    stop_workers,
    to_csv,
    trained_model,
    wait_for,
)

FAST = {"MSVMAV_WORKER_POLL_INTERVAL": "0.05", "MSVMAV_CANCEL_CHECK_INTERVAL": "0.05",
        "MSVMAV_HEARTBEAT_INTERVAL": "0.3", "MSVMAV_LEASE_SECONDS": "1.5"}
N_ROWS, CHUNK = 3000, 20  # 150 chunks: a worker needs a while, so it is killed mid-file


def _chunks_written(engine, job_id: int) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(BatchPart).where(
            BatchPart.job_id == job_id, BatchPart.kind == "output"))


def _submit(client, model_id: int, content: bytes) -> dict:
    r = client.post("/batch-predictions", files={"file": ("rows.csv", content)},
                    data={"model_id": str(model_id), "chunk_rows": str(CHUNK)})
    assert r.status_code == 202, r.text
    return r.json()


def test_worker_killed_mid_file_resumes_and_writes_every_row_once(
    client, worker, engine, database_url, tmp_path
):
    model = trained_model(client, worker, to_csv(*blobs(n=80)))
    X = blobs(n=N_ROWS, seed=9)[0].round(6)
    job = _submit(client, model["id"], to_csv(X, ["pos"] * N_ROWS))
    first = start_worker_process(database_url, tmp_path, env=FAST)
    procs = [first]
    try:
        wait_for(lambda: _chunks_written(engine, job["id"]) >= 10, timeout=60, interval=0.01)
        # the second worker starts (its imports) while the first runs: idle, it cannot take
        # the job under the first's live lease; it resumes the job once that lease expires
        procs.append(start_worker_process(database_url, tmp_path, env=FAST))
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        killed_at = _chunks_written(engine, job["id"])
        assert killed_at < N_ROWS // CHUNK, "the job ended before the kill: nothing tested"
        assert client.get(f"/jobs/{job['id']}").json()["status"] == "running"
        body = job_finished(client, job["id"])
    finally:
        outputs = stop_workers(procs)
    assert body["status"] == "succeeded", (body, outputs)
    assert body["attempts"] == 2
    assert body["result"]["n_rows"] == N_ROWS and body["result"]["chunks"] == N_ROWS // CHUNK
    detail = client.get(f"/jobs/{job['id']}").json()
    assert [a["outcome"] for a in detail["attempt_history"]] == ["lost", "succeeded"]
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content))
    assert out["row"].tolist() == list(range(N_ROWS))  # every row, once, in order
    expected = client.post("/predict", json={"model_id": model["id"],
                                             "instances": X.tolist()}).json()
    np.testing.assert_allclose(out["decision_value"],
                               [p["decision_value"] for p in expected["predictions"]],
                               rtol=1e-12, atol=1e-12)


def test_cancel_stops_a_batch_job_mid_file(client, worker, engine, database_url):
    """The job runs in a thread of this process (running_job: the worker's own run_job; a
    worker process's imports cost ~2 s of CPU, and the kill above is what needs a process)."""
    model = trained_model(client, worker, to_csv(*blobs(n=80)))
    X = blobs(n=N_ROWS, seed=9)[0].round(6)
    job = _submit(client, model["id"], to_csv(X, ["pos"] * N_ROWS))
    with running_job(engine, worker) as (job_id, statuses):
        assert job_id == job["id"]
        wait_for(lambda: _chunks_written(engine, job["id"]) >= 5, timeout=60, interval=0.01)
        assert client.post(f"/jobs/{job['id']}/cancel").status_code in (200, 202)
        body = wait_for(lambda: (b := client.get(f"/jobs/{job['id']}").json())["status"]
                        != "running" and b, timeout=30)
    assert statuses == ["cancelled"] and body["status"] == "cancelled"
    assert _chunks_written(engine, job["id"]) < N_ROWS // CHUNK
    assert client.get(f"/batch-predictions/{job['id']}/result").status_code == 409
