"""Large upload benchmark (issue 20): a 1M-row CSV of 100 0/1 features through POST /datasets on
a real ``msvmav serve`` process, then a train job on it.

    .venv/bin/python bench/upload_large.py                               # SQLite, 1M rows
    .venv/bin/python bench/upload_large.py --rows 200000
    .venv/bin/python bench/upload_large.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/msvmav_bench_storage

The CSV (``--csv``, default /tmp/msvmav_large.csv) is written once: a header ``f0..f99,y``, then
rows of 0/1 features and a 0/1 label that depends on the first ten (about 202 MB at 1M rows).
The API runs as ``msvmav serve --workers 0`` at the default limits (with ``--migrate``); its
peak RSS growth during the upload is read from /proc (VmHWM, reset just before through
/proc/PID/clear_refs). Anchor, in this process: ``pandas.read_csv`` of the same file,
alternated with the upload ``--repeat`` times; the best of each is compared (the largest RSS
growth is shown). Then one ``msvmav worker`` process runs a train job (msvmav, ``--max-iter``
iterations, a 20 % hold-out) on the last upload; its status, time and the worker's peak RSS
(against the float64 matrix it trains on) are printed. PostgreSQL: pass an
empty database you created (``createdb -h 127.0.0.1 -U postgres msvmav_bench_storage``) and drop
it afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tests.live_server import free_port  # noqa: E402

N_FEATURES = 100


def write_csv(path: Path, n_rows: int, seed: int = 0) -> None:
    """0/1 features as the characters '0'/'1' joined by commas, written a block at a time."""
    rng = np.random.default_rng(seed)
    with path.open("wb") as out:
        out.write((",".join(f"f{j}" for j in range(N_FEATURES)) + ",y\n").encode())
        for start in range(0, n_rows, 100_000):
            n = min(100_000, n_rows - start)
            bits = rng.integers(0, 2, size=(n, N_FEATURES), dtype=np.uint8)
            y = (bits[:, :10].sum(axis=1) + rng.integers(-1, 2, size=n) > 5).astype(np.uint8)
            cells = np.concatenate([bits, y[:, None]], axis=1) + ord("0")
            line = np.full((n, 2 * (N_FEATURES + 1)), ord(","), dtype=np.uint8)
            line[:, 0::2] = cells
            line[:, -1] = ord("\n")
            out.write(line.tobytes())


def _kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/{pid}/status")


def _request(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=3600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def upload(url: str, path: Path) -> tuple[int, dict]:
    """multipart/form-data of the file (built in this process, not the server's)."""
    boundary = "msvmavbenchboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{path.name}\"\r\nContent-Type: text/csv\r\n\r\n").encode()
    body = head + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    return _request(f"{url}/datasets", body,
                    {"Content-Type": f"multipart/form-data; boundary={boundary}"})


def wait_ready(url: str, proc: subprocess.Popen) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit("msvmav serve exited")
        try:
            if _request(f"{url}/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("msvmav serve did not become ready")


def train(url: str, env: dict, dataset_id: int, max_iter: int, job_rows: int) -> None:
    status, job = _request(f"{url}/train", json.dumps(
        {"dataset_id": dataset_id, "max_iter": max_iter, "test_fraction": 0.2, "seed": 0}
    ).encode(), {"Content-Type": "application/json"})
    if status != 202:
        raise SystemExit(f"/train answered {status}: {job}")
    start = time.perf_counter()
    worker = subprocess.Popen([sys.executable, "-m", "app.cli.main", "worker"], env=env)
    try:
        while True:
            _, job = _request(f"{url}/jobs/{job['id']}")
            if job["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.5)
        peak = _kb(worker.pid, "VmHWM:") * 1024
        matrix = job_rows * N_FEATURES * 8
        print(f"  train job: {job['status']} in {time.perf_counter() - start:.1f} s "
              f"({job.get('message') or job.get('error')}); peak worker RSS "
              f"{peak / 2**20:.0f} MiB = {peak / matrix:.2f}x the float64 matrix "
              f"({matrix / 2**20:.0f} MiB)")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--csv", type=Path, default=Path("/tmp/msvmav_large.csv"))
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-iter", type=int, default=5)
    args = parser.parse_args()
    if not args.csv.is_file():
        write_csv(args.csv, args.rows)
    size = args.csv.stat().st_size
    with tempfile.TemporaryDirectory() as tmp:
        db = args.database_url or f"sqlite:///{tmp}/bench.db"
        env = {**os.environ, "MSVMAV_DATABASE_URL": db, "PYTHONPATH": str(ROOT)}
        url = f"http://127.0.0.1:{free_port()}"
        serve = subprocess.Popen(
            [sys.executable, "-m", "app.cli.main", "serve", "--workers", "0", "--migrate",
             "--port", url.rsplit(":", 1)[1]], env=env, cwd=tmp)
        try:
            wait_ready(url, serve)
            import pandas as pd

            t_uploads, t_reads, growths = [], [], []
            for _ in range(args.repeat):  # the anchor alternated with the subject
                t0 = time.perf_counter()
                pd.read_csv(args.csv)
                t_reads.append(time.perf_counter() - t0)
                Path(f"/proc/{serve.pid}/clear_refs").write_text("5")
                before = _kb(serve.pid, "VmRSS:")
                start = time.perf_counter()
                status, body = upload(url, args.csv)
                t_uploads.append(time.perf_counter() - start)
                growths.append((_kb(serve.pid, "VmHWM:") - before) * 1024)
                if status != 201:
                    break
            t_upload, t_pandas, growth = min(t_uploads), min(t_reads), max(growths)
            print(f"{args.csv} ({size / 1e6:.0f} MB) on {db.split(':', 1)[0]}: HTTP {status}")
            print(f"  upload (POST /datasets)   {t_upload:8.2f} s  (all: "
                  f"{', '.join(f'{t:.2f}' for t in t_uploads)})")
            print(f"  pandas.read_csv           {t_pandas:8.2f} s  (all: "
                  f"{', '.join(f'{t:.2f}' for t in t_reads)})")
            print(f"  ratio upload / pandas     {t_upload / t_pandas:8.2f}x  (goal <= 3x)")
            print(f"  peak API RSS growth       {growth / 2**20:8.0f} MiB = "
                  f"{growth / size:.2f}x the file  (goal <= 3x)")
            if status != 201:
                print(f"  {body}")
                return
            train(url, env, body["id"], args.max_iter, body["n_rows"])
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=60)


if __name__ == "__main__":
    main()
