"""Benchmark: what a large JSON body costs the API process (issue 8, defect 3).

    .venv/bin/python bench/json_body_limit.py            # default limit (MSVMAV_MAX_JSON_BYTES)
    .venv/bin/python bench/json_body_limit.py --mb 40

Each scenario starts a fresh API (``msvmav serve`` on 127.0.0.1, a scratch SQLite database),
warms it up with one small request, then sends one body and reads the server's peak resident
set (VmHWM) before and after. Prints the peak RSS growth and its ratio to the body's size
(the anchor, measured in the same run):

* ``over, Content-Length``: a body larger than the limit, declared — 413 before reading it;
* ``over, chunked``: the same body streamed without Content-Length — 413 once the count
  crosses the limit;
* ``at the limit``: a valid /predict body just under the limit (rows of numbers), parsed and
  validated — 422 only because the model does not exist.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def _predict_body(size: int) -> bytes:
    """A /predict body of about ``size`` bytes: rows of 40 numbers."""
    row = "[" + ",".join(f"{0.1 + j / 1000:.6f}" for j in range(40)) + "]"
    n = max(1, (size - 40) // (len(row) + 1))
    return ('{"model_id": 2147483647, "instances": [' + ",".join([row] * n) + "]}").encode()


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


def run(name: str, body: bytes, *, chunked: bool, limit: int) -> tuple[int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        env = {
            **os.environ,
            "MSVMAV_DATABASE_URL": f"sqlite:///{tmp}/bench.db",
            "MSVMAV_MAX_JSON_BYTES": str(limit),
            "MSVMAV_LOG_LEVEL": "WARNING",
        }
        subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"], env=env, cwd=ROOT, check=True,
            capture_output=True,
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=url, timeout=120) as client:
                for _ in range(200):
                    try:
                        if client.get("/livez").status_code == 200:
                            break
                    except httpx.TransportError:
                        time.sleep(0.05)
                client.post("/predict", json={"model_id": 1, "instances": [[1.0]]})  # warm up
                before = _peak_kib(server.pid)
                headers = {"content-type": "application/json"}
                content = _chunks(body) if chunked else body
                r = client.post("/predict", content=content, headers=headers)
                after = _peak_kib(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
    growth_mb = (after - before) / 1024
    print(
        f"{name:<28} body {len(body) / MIB:7.1f} MiB  -> {r.status_code}  "
        f"peak RSS growth {growth_mb:7.1f} MiB  = {growth_mb / (len(body) / MIB):5.2f} x body"
    )
    return r.status_code, growth_mb


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=40.0, help="size of the over-limit body (MB)")
    p.add_argument("--limit-mib", type=float, default=32.0, help="MSVMAV_MAX_JSON_BYTES in MiB")
    args = p.parse_args()
    limit = int(args.limit_mib * MIB)
    over = b'{"model_id": 1, "instances": [' + b"[0.5, 1.5, 2.5]," * int(args.mb * 1e6 / 16)
    over += b"[0]]}"
    print(json.dumps({"limit_bytes": limit, "over_body_bytes": len(over)}))
    run("over, Content-Length", over, chunked=False, limit=limit)
    run("over, chunked", over, chunked=True, limit=limit)
    run("at the limit (parsed)", _predict_body(limit - 1024), chunked=False, limit=limit)


if __name__ == "__main__":
    main()
