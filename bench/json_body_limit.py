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
* ``at the limit``: a valid /predict body just under the limit (rows of 40 numbers) for a
  linear model trained first on 40 features: parsed, encoded and predicted — 200.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _api import live_api, peak_kib  # noqa: E402

MIB = 1024 * 1024


FEATURES = 40


def _predict_body(size: int, model_id: int) -> bytes:
    """A /predict body of about ``size`` bytes: rows of FEATURES numbers."""
    row = "[" + ",".join(f"{0.1 + j / 1000:.6f}" for j in range(FEATURES)) + "]"
    n = max(1, (size - 40) // (len(row) + 1))
    return (f'{{"model_id": {model_id}, "instances": [' + ",".join([row] * n) + "]}").encode()


def _train(client: httpx.Client) -> int:
    """A linear MSVMAv on 200 random rows of FEATURES features (the embedded worker)."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.random((200, FEATURES))
    y = np.where(X[:, 0] + X[:, 1] > 1, "pos", "neg")
    lines = [",".join([*(f"x{j}" for j in range(FEATURES)), "y"])]
    lines += [",".join([*(f"{v:.6f}" for v in row), lab]) for row, lab in zip(X, y, strict=True)]
    r = client.post("/datasets", files={"file": ("train.csv", "\n".join(lines).encode())})
    r.raise_for_status()
    r = client.post("/train", json={"dataset_id": r.json()["id"], "max_iter": 30})
    r.raise_for_status()
    job = r.json()
    while job["status"] not in ("succeeded", "failed"):
        time.sleep(0.1)
        job = client.get(f"/jobs/{job['id']}").json()
    if job["status"] != "succeeded":
        raise SystemExit(f"training failed: {job}")
    return job["model_id"]


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


def run(name: str, body: bytes | None, *, chunked: bool, limit: int) -> tuple[int, float]:
    """One scenario on a fresh API; ``body`` None: a model is trained, and the body is a
    /predict of it at the limit."""
    with live_api({"MSVMAV_MAX_JSON_BYTES": str(limit)}, timeout=120) as (client, pid):
        client.post("/predict", json={"model_id": 1, "instances": [[1.0]]})  # warm up
        if body is None:
            model_id = _train(client)
            body = _predict_body(limit - 1024, model_id)
            probe = {"model_id": model_id, "instances": [[0.5] * FEATURES]}
            client.post("/predict", json=probe).raise_for_status()  # model cached
        before = peak_kib(pid)
        headers = {"content-type": "application/json"}
        content = _chunks(body) if chunked else body
        r = client.post("/predict", content=content, headers=headers)
        after = peak_kib(pid)
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
    status, _ = run("at the limit (predicted)", None, chunked=False, limit=limit)
    if status != 200:
        raise SystemExit(f"the /predict at the limit answered {status}")


if __name__ == "__main__":
    main()
