"""Benchmark: what a CSV body of one very long line costs the API process (issue 28, point 4).

    .venv/bin/python bench/wide_csv.py            # a 10 MB line
    .venv/bin/python bench/wide_csv.py --mb 30

Each scenario starts a fresh API (``msvmav serve`` on 127.0.0.1, a scratch SQLite database),
trains a 3-feature model with the embedded worker, predicts once (the model cached), then sends
one body and reads the server's peak resident set (VmHWM) before and after. Prints the peak RSS
growth and its ratio to the body's size:

* ``/predict/file, one line``: ``1,1,1,…`` with no line break, uploaded as a file — refused
  (422) from the first line's field count before anything is decoded or parsed;
* ``invocations text/csv, one line``: the same body to ``/models/{id}/invocations`` (400);
* ``/predict/file, valid rows`` (the anchor): a file of the same size of 3-number rows, read,
  encoded and predicted (200) — what an accepted body of that size costs.

Before the check (issue 28) the first took RSS 229 → 820 MiB for 10 MB (~60 × the body).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _api import live_api, peak_kib  # noqa: E402

MIB = 1024 * 1024


def _train(client: httpx.Client) -> int:
    lines = ["x0,x1,x2,y"] + [
        f"{i % 7 / 7:.3f},{i % 5 / 5:.3f},{i % 3 / 3:.3f},{'pos' if i % 2 else 'neg'}"
        for i in range(100)
    ]
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


def _send(client: httpx.Client, how: str, model_id: int, body: bytes) -> httpx.Response:
    if how == "invocations":
        return client.post(
            f"/models/{model_id}/invocations", content=body, headers={"content-type": "text/csv"}
        )
    return client.post(
        "/predict/file", files={"file": ("body.csv", body)}, data={"model_id": str(model_id)}
    )


def run(name: str, how: str, body: bytes) -> float:
    settings = {
        "MSVMAV_MAX_PREDICT_INSTANCES": "10000000",  # the anchor's rows
        "MSVMAV_PREDICTION_LOG": "false",  # (the anchor's half a million rows: not measured)
    }
    with live_api(settings, timeout=300) as (client, pid):
        model_id = _train(client)
        _send(client, how, model_id, b"x0,x1,x2\n0.1,0.2,0.3\n").raise_for_status()
        before = peak_kib(pid)
        started = time.perf_counter()
        r = _send(client, how, model_id, body)
        seconds = time.perf_counter() - started
        after = peak_kib(pid)
    growth = (after - before) / 1024
    ratio = growth / (len(body) / MIB)
    print(
        f"{name:<34} body {len(body) / MIB:6.1f} MiB -> {r.status_code} in {seconds:5.2f} s  "
        f"peak RSS growth {growth:7.1f} MiB = {ratio:5.2f} x body"
    )
    return ratio


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=10.0, help="size of the one-line body (MB)")
    args = p.parse_args()
    n = int(args.mb * 1e6 / 2)
    line = b"1," * n + b"1"
    rows = b"x0,x1,x2\n" + b"0.123,0.456,0.789\n" * (len(line) // 18)
    anchor = run("/predict/file, valid rows (anchor)", "file", rows)
    one = run("/predict/file, one line", "file", line)
    inv = run("invocations text/csv, one line", "invocations", line)
    print(f"one line / anchor: /predict/file {one / anchor:.2f}, invocations {inv / anchor:.2f}")
    if max(one, inv) > 2.0:
        raise SystemExit("a one-line body cost more than 2 x its size")


if __name__ == "__main__":
    main()
