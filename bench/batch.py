"""Batch scoring benchmark (issue 29): a batch_predict job on a real ``msvmav worker`` process
against the plain pipeline on the same file, at two file sizes.

    .venv/bin/python bench/batch.py                         # 1M and 10M rows, SQLite
    .venv/bin/python bench/batch.py --rows 200000 2000000   # smaller, when time is short
    .venv/bin/python bench/batch.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/msvmav_bench_batch

For each size a CSV of ``--features`` numeric columns (6 decimals) is written once to
``--dir`` (default /tmp). A linear MSVMAv model is trained (in this process) on 20,000 rows of
the same distribution. The file is submitted as POST /batch-predictions does it
(``app.batch.service.submit``: stored in the database in pieces), then one ``msvmav worker``
process runs the job (CSV output, default chunk rows); the job's time is its
``finished_at - started_at`` and the worker's peak RSS is read from /proc (VmHWM) once the job
has ended. Anchor, in this process on the same file: ``pd.read_csv`` → the model's scaling →
the estimator's ``decision_function`` → ``DataFrame.to_csv`` (labels and decision values) to a
file. Printed: both times, their ratio (the target is at most 2), the worker's peak RSS at
each size (the worker's imports, pandas, scikit-learn and pyarrow, are most of it). The
machine is shared: figures are noisy.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def write_csv(path: Path, n_rows: int, d: int, seed: int = 0) -> None:
    """Gaussian features, a block of 500,000 rows at a time."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        out.write(",".join(f"x{j}" for j in range(d)) + "\n")
        for start in range(0, n_rows, 500_000):
            n = min(500_000, n_rows - start)
            block = pd.DataFrame(rng.normal(size=(n, d)) + (np.arange(n) % 2)[:, None])
            block.to_csv(out, header=False, index=False, float_format="%.6f")


def train_model(database_url: str, d: int) -> int:
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.jobs.worker import Worker
    from app.main import create_app

    settings = Settings(database_url=database_url, prediction_log=False, _env_file=None)
    rng = np.random.default_rng(1)
    y = np.arange(20_000) % 2
    X = rng.normal(size=(20_000, d)) + y[:, None]
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(d)]).assign(y=y)
    app = create_app(settings)
    with TestClient(app) as client:
        ds = client.post("/datasets", files={"file": ("train.csv", frame.to_csv(index=False))})
        job = client.post("/train", json={"dataset_id": ds.json()["id"], "max_iter": 50}).json()
        Worker(settings).run_once()
        return client.get(f"/jobs/{job['id']}").json()["model_id"]


def submit(database_url: str, model_id: int, path: Path) -> int:
    from app.batch.service import BatchOptions, submit

    runtime = _runtime(database_url)
    try:
        with runtime.sessions() as session, path.open("rb") as file:
            job = submit(session, BatchOptions(model_id=model_id), file, path.name,
                         runtime.settings)
            session.commit()
            return job.id
    finally:
        runtime.close()


def _runtime(database_url: str):
    """The service's runtime on ``database_url``: its sessions are what the batch service and
    model acquisition take (a bare session factory's are refused)."""
    from app.core.config import Settings
    from app.core.db import make_engine
    from app.core.runtime import Runtime

    return Runtime(make_engine(database_url), Settings(database_url=database_url, _env_file=None))


def rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def run_job(database_url: str, job_id: int, cwd: str) -> tuple[float, int, str]:
    """The job's seconds, the worker's peak RSS (kB), and its status."""
    from sqlalchemy import select

    from app.core.db import make_engine
    from app.jobs.orm import Job

    env = {**os.environ, "MSVMAV_DATABASE_URL": database_url, "MSVMAV_PREDICTION_LOG": "false",
           "MSVMAV_WORKER_POLL_INTERVAL": "0.05"}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "worker"], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    engine = make_engine(database_url)
    try:
        while True:
            time.sleep(0.2)
            with engine.connect() as conn:
                job = conn.execute(select(Job).where(Job.id == job_id)).first()
            if job.status not in ("queued", "running"):
                break
        peak = rss_kb(proc.pid, "VmHWM")
        seconds = (job.finished_at - job.started_at).total_seconds()
        return seconds, peak, f"{job.status} {job.message} {job.error or ''}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        engine.dispose()


def anchor(database_url: str, model_id: int, path: Path, out: Path) -> float:
    """pd.read_csv -> scaling -> decision_function -> to_csv, timed."""
    from app.serving.acquire import cold

    runtime = _runtime(database_url)
    with runtime.sessions() as session:
        loaded = cold(session, model_id)
    start = time.perf_counter()
    X = pd.read_csv(path).to_numpy(dtype=np.float64)
    if loaded.scaling is not None:
        X = loaded.scaling.transform(X)
    D = loaded.estimator.decision_function(X)
    labels = loaded.estimator.classes_[(D > 0).astype(int)]
    pd.DataFrame({"label": labels, "decision_value": D}).to_csv(out, index_label="row")
    seconds = time.perf_counter() - start
    runtime.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    from app.core.db import upgrade_to_head

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        upgrade_to_head(url)
        model_id = train_model(url, args.features)
        print(f"model {model_id}: linear MSVMAv, {args.features} features")
        print("rows        job s   anchor s   ratio   worker peak RSS MB")
        for n in args.rows:
            path = Path(args.dir) / f"msvmav_batch_{n}x{args.features}.csv"
            if not path.exists():
                write_csv(path, n, args.features)
            job_id = submit(url, model_id, path)
            seconds, peak, status = run_job(url, job_id, tmp)
            base = anchor(url, model_id, path, Path(tmp) / "anchor.csv")
            print(f"{n:<10d} {seconds:7.2f}   {base:7.2f}   {seconds / base:5.2f}   "
                  f"{peak / 1024:8.0f}   {status[:60]}")


if __name__ == "__main__":
    main()
