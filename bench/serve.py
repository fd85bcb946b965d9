"""Benchmark: /predict against a bare FastAPI route, and 100k-row batches (issue 9); /predict
by registry alias against by id and the bare route (issue 17).

    .venv/bin/python bench/serve.py                  # wrk 3 x 10 s per side, then the batches
    .venv/bin/python bench/serve.py --rounds 2 --duration 5 --skip-batch
    .venv/bin/python bench/serve.py --auth                # every request with an API key
    MSVMAV_PREDICTION_LOG=false .venv/bin/python bench/serve.py   # the prediction log off
    .venv/bin/python bench/serve.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
    # SQLite and PostgreSQL, keys off and on, one-row wrk only, one table at the end (issue 30):
    .venv/bin/python bench/serve.py --matrix postgresql+psycopg://postgres@127.0.0.1:5432/test

Starts ``msvmav serve`` (one API process, one worker) on a temporary SQLite database, uploads
wdbc.arff (label ``Class``), trains a linear MSVMAv and waits for it. Starts a *bare* FastAPI app
with one sync POST route that validates the same body (``PredictRequest``) and returns a
constant, under the same uvicorn settings. Registers the model as version 1 of ``wdbc`` with the
alias ``production``. Runs ``wrk -t1 -c8`` (Debian package ``wrk``) with a Lua script POSTing one
wdbc row, alternating service by ``model_id`` / service by ``"model": "wdbc@production"`` /
bare, and prints throughput, the ratios to the bare route, p50/p99, errors and each process's
CPU time per request (Linux; steadier than throughput on a shared machine). Then times one
``/predict`` of 100,000 rows (JSON) and one ``/predict/file`` of a 100,000-row CSV end to end
(request sent to response read), beside the anchor: numpy's linear decision function on the
same 100k x 30 matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is named like a module of the package it measures: keep its folder off the path,
# and put the repository on it (the tests' helpers).
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [
    p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
]

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from app.predict.schemas import PredictRequest  # noqa: E402
from tests.live_server import free_port  # noqa: E402

DATA_CANDIDATES = [
    Path(os.environ.get("MSVMAV_DATASETS", "/nonexistent")),
    ROOT.parent / "shared" / "datasets",
    ROOT.parent.parent / "shared" / "datasets",
]
BATCH_ROWS = 100_000
REGISTERED = "wdbc"


def _bare_app():  # noqa: ANN202 - built only in the child process
    from fastapi import FastAPI

    bare = FastAPI()

    @bare.post("/predict")
    def predict(request: PredictRequest) -> dict:
        return {"model_id": request.model_id, "n": 1}

    return bare


def run_bare(port: int) -> None:
    import uvicorn

    uvicorn.run(_bare_app(), host="127.0.0.1", port=port, log_config=None)


def wait_up(url: str, timeout: float = 180.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def dataset_path(name: str) -> Path:
    for d in DATA_CANDIDATES:
        if (d / name).exists():
            return d / name
    raise SystemExit(f"{name} not found in {[str(d) for d in DATA_CANDIDATES]}")


def create_key(base: str) -> str:
    """A write key, made over POST /keys while the new service is still open; from then on the
    service requires keys."""
    r = httpx.post(base + "/keys", json={"name": "bench", "scope": "write"}, timeout=30)
    r.raise_for_status()
    return r.json()["key"]


def train_model(base: str, headers: dict[str, str]) -> tuple[int, list[str], np.ndarray]:
    """Upload wdbc, train linear MSVMAv, return the model id, its feature names and the rows."""
    from app.ingest import parse_dataset

    path = dataset_path("wdbc.arff")
    content = path.read_bytes()
    with httpx.Client(base_url=base, timeout=120, headers=headers) as c:
        r = c.post("/datasets", files={"file": (path.name, content)}, data={"label": "Class"})
        r.raise_for_status()
        ds = r.json()
        r = c.post("/train", json={"dataset_id": ds["id"], "kernel": "linear"})
        r.raise_for_status()
        job_id = r.json()["id"]
        while True:
            job = c.get(f"/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.2)
        if job["status"] != "succeeded":
            raise SystemExit(f"training failed: {job}")
        model = c.get(f"/models/{job['model_id']}").json()
    parsed = parse_dataset(content, path.name, label="Class")
    return job["model_id"], list(model["feature_names"]), np.asarray(parsed.X, dtype=np.float64)


_WRK_RE = {
    "rps": re.compile(r"Requests/sec:\s+([\d.]+)"),
    "p50": re.compile(r"^\s+50%\s+([\d.]+)(us|ms|s)\b", re.M),
    "p99": re.compile(r"^\s+99%\s+([\d.]+)(us|ms|s)\b", re.M),
    "non2xx": re.compile(r"Non-2xx or 3xx responses:\s+(\d+)"),
    "sock": re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)"),
    "requests": re.compile(r"(\d+) requests in"),
}
_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def process_cpu(pid: int | None) -> float | None:
    """CPU seconds the threads of process ``pid`` ran so far (its log writer's and thread
    pool's too); None off Linux. Per request, less noisy than throughput on a shared machine:
    waiting for a core (other work's load) does not count, only what the process ran."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        return None


def run_wrk(
    url: str, script: Path, duration: int, connections: int, pid: int | None = None
) -> dict:
    cpu = process_cpu(pid)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = process_cpu(pid)
    res: dict = {"rps": float(_WRK_RE["rps"].search(out).group(1))}
    for q in ("p50", "p99"):
        m = _WRK_RE[q].search(out)
        res[q] = float(m.group(1)) * _UNIT_MS[m.group(2)]
    m = _WRK_RE["non2xx"].search(out)
    errors = int(m.group(1)) if m else 0
    m = _WRK_RE["sock"].search(out)
    if m:
        errors += sum(int(g) for g in m.groups())
    res["errors"] = errors
    res["requests"] = int(_WRK_RE["requests"].search(out).group(1))
    res["cpu_us"] = (
        (after - cpu) / max(res["requests"], 1) * 1e6 if cpu is not None and after else None
    )
    return res


def timed_post(client: httpx.Client, url: str, repeat: int, **kwargs) -> tuple[list[float], dict]:
    times = []
    body: dict = {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = client.post(url, **kwargs)
        raw = r.read()
        times.append(time.perf_counter() - t0)
        if r.status_code != 200:
            raise SystemExit(f"{url}: {r.status_code} {raw[:500]!r}")
        body = json.loads(raw)
    return times, body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="alternating wrk rounds per side")
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3, help="timed batch requests of each kind")
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--skip-wrk", action="store_true")
    ap.add_argument(
        "--postgres",
        metavar="ADMIN_URL",
        help="serve on a scratch PostgreSQL database created next to this one (e.g. "
        "postgresql+psycopg://postgres@127.0.0.1:5432/test) and dropped at the end, instead of "
        "SQLite",
    )
    ap.add_argument(
        "--auth",
        action="store_true",
        help="serve with API keys required: every service request carries a write key "
        "(the bare route has no keys: this measures what a key costs)",
    )
    ap.add_argument(
        "--matrix",
        metavar="ADMIN_URL",
        help="one-row wrk only (no batches), four set-ups in one run: SQLite and a scratch "
        "PostgreSQL database next to ADMIN_URL, each with keys off and on; then one table of "
        "every set-up's ratios to its bare route and p99 side by side",
    )
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required: apt-get install -y wrk")
    if args.matrix:
        args.skip_batch = True
        summaries = [
            run_setup(args, postgres, auth)
            for auth in (False, True)
            for postgres in (None, args.matrix)
        ]
        print_matrix(args, summaries)
        return 0
    run_setup(args, args.postgres, args.auth)
    return 0


def run_setup(args: argparse.Namespace, postgres: str | None, auth: bool) -> dict:
    """Serve on SQLite (``postgres`` None) or a scratch PostgreSQL database next to
    ``postgres``, keys required or not; run the wrk rounds and the batches as asked. Returns
    the wrk summary (empty with --skip-wrk)."""
    tmp = Path(tempfile.mkdtemp(prefix="msvmav-bench-serve-"))
    database_url = f"sqlite:///{tmp / 'bench.db'}"
    if postgres:
        from app.core.db import upgrade_to_head
        from tests.app.support import create_postgres_database

        database_url = create_postgres_database(postgres)
        upgrade_to_head(database_url)
    env = {**os.environ, "MSVMAV_DATABASE_URL": database_url}
    svc_port, bare_port = free_port(), free_port()
    exe = Path(sys.executable).parent / "msvmav"
    procs = [
        subprocess.Popen(
            [str(exe), "serve", "--port", str(svc_port), "--workers", "1"],
            env=env,
            cwd=tmp,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--_bare", str(bare_port)],
            env=env,
            cwd=tmp,
            stderr=subprocess.DEVNULL,
        ),
    ]
    summary: dict = {"database": "PostgreSQL" if postgres else "SQLite", "keys": auth}
    try:
        svc = f"http://127.0.0.1:{svc_port}"
        bare = f"http://127.0.0.1:{bare_port}"
        wait_up(svc + "/livez")
        wait_up(bare + "/docs")
        headers = {"Authorization": f"Bearer {create_key(svc)}"} if auth else {}
        model_id, names, X = train_model(svc, headers)
        n, d = X.shape
        print(f"\nmodel {model_id}: linear MSVMAv on wdbc ({n} rows, {d} features), "
              + summary["database"] + (", API keys required" if auth else ""))

        register(svc, model_id, headers)
        if not args.skip_wrk:
            pids = {"service": procs[0].pid, "by alias": procs[0].pid, "bare": procs[1].pid}
            summary |= wrk_rounds(args, svc, bare, model_id, X, tmp, headers, pids)
        if not args.skip_batch:
            batches(args, svc, model_id, names, X, headers)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
        if postgres:
            from tests.app.support import drop_postgres_database

            drop_postgres_database(postgres, database_url)
    return summary


def print_matrix(args: argparse.Namespace, summaries: list[dict]) -> None:
    """Every set-up's medians side by side (goal: each ratio >= 0.8, each p99 <= 15 ms)."""
    print(f"\nsummary: wrk -t1 -c{args.connections} -d{args.duration}s, {args.rounds} rounds "
          "a side, medians; ratio = service req/s / bare req/s in the same round")
    print(f"{'database':11} {'keys':5} {'by id/bare':>10} {'alias/bare':>10} "
          f"{'p99 id ms':>9} {'p99 alias':>9} {'p99 bare':>8} {'CPU µs id/bare':>15}")
    for s in summaries:
        cpu = f"{s['cpu_id']:.0f}/{s['cpu_bare']:.0f}" if s.get("cpu_id") else "-"
        print(
            f"{s['database']:11} {'on' if s['keys'] else 'off':5} {s['ratio_id']:10.2f} "
            f"{s['ratio_alias']:10.2f} {s['p99_id']:9.1f} {s['p99_alias']:9.1f} "
            f"{s['p99_bare']:8.1f} {cpu:>15}"
        )
    print("goal: ratios >= 0.8 on both databases, keys off and on; p99 <= 15 ms")


def wrk_script(path: Path, body: str, headers: dict[str, str]) -> Path:
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"']
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    path.write_text("\n".join([*lines, f"wrk.body = {json.dumps(body)}", ""]))
    return path


def wrk_rounds(
    args: argparse.Namespace,
    svc: str,
    bare: str,
    model_id: int,
    X: np.ndarray,
    tmp: Path,
    headers: dict[str, str],
    pids: dict[str, int],
) -> dict:
    row = [X[0].tolist()]
    body = json.dumps({"model_id": model_id, "instances": row})
    # The same model through the registry: registered model wdbc, version 1, @production.
    by_alias = json.dumps({"model": f"{REGISTERED}@production", "instances": row})
    scripts = {
        "service": wrk_script(tmp / "service.lua", body, headers),
        "by alias": wrk_script(tmp / "alias.lua", by_alias, headers),
        "bare": wrk_script(tmp / "bare.lua", body, {}),
    }
    urls = {"service": svc, "by alias": svc, "bare": bare}
    for name, url in urls.items():  # warm up (the service's model cache, imports)
        run_wrk(url + "/predict", scripts[name], 2, args.connections)
    rows: dict[str, list[dict]] = {name: [] for name in urls}
    for _ in range(args.rounds):
        for name, url in urls.items():
            res = run_wrk(
                url + "/predict", scripts[name], args.duration, args.connections, pids[name]
            )
            rows[name].append(res)
    print(f"\nwrk -t1 -c{args.connections} -d{args.duration}s, POST /predict (one row), "
          f"{args.rounds} alternating rounds; service: by model_id, by alias: "
          f'"model": "{REGISTERED}@production"')
    print(f"{'side':8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'CPU µs/req':>11}")
    for name, runs in rows.items():
        for r in runs:
            cpu = f"{r['cpu_us']:11.0f}" if r["cpu_us"] is not None else f"{'-':>11}"
            print(
                f"{name:8} {r['rps']:9.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['errors']:7d} {cpu}"
            )
    for side in ("service", "by alias"):
        ratios = [s["rps"] / b["rps"] for s, b in zip(rows[side], rows["bare"], strict=True)]
        print(
            f"throughput ratio {side}/bare per round: "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + f"; median {statistics.median(ratios):.2f} (goal >= 0.8)"
        )
    if all(r["cpu_us"] is not None for runs in rows.values() for r in runs):
        cpu = {name: statistics.median(r["cpu_us"] for r in runs) for name, runs in rows.items()}
        print(
            "process CPU per request, median: "
            + ", ".join(f"{name} {us:.0f} µs" for name, us in cpu.items())
            + f"; bare/service {cpu['bare'] / cpu['service']:.2f}"
        )
    ratios = [a["rps"] / s["rps"] for a, s in zip(rows["by alias"], rows["service"], strict=True)]
    print(f"by alias/by id median {statistics.median(ratios):.2f}")
    p99 = {name: statistics.median(r["p99"] for r in runs) for name, runs in rows.items()}
    print(
        f"service p99 median {p99['service']:.1f} ms, by alias {p99['by alias']:.1f} ms, "
        f"bare {p99['bare']:.1f} ms (goal <= 15 ms)"
    )
    cpu_ok = all(r["cpu_us"] is not None for runs in rows.values() for r in runs)
    return {
        "ratio_id": statistics.median(
            s["rps"] / b["rps"] for s, b in zip(rows["service"], rows["bare"], strict=True)
        ),
        "ratio_alias": statistics.median(
            s["rps"] / b["rps"] for s, b in zip(rows["by alias"], rows["bare"], strict=True)
        ),
        "p99_id": p99["service"],
        "p99_alias": p99["by alias"],
        "p99_bare": p99["bare"],
        "cpu_id": statistics.median(r["cpu_us"] for r in rows["service"]) if cpu_ok else None,
        "cpu_bare": statistics.median(r["cpu_us"] for r in rows["bare"]) if cpu_ok else None,
    }


def register(base: str, model_id: int, headers: dict[str, str]) -> None:
    """Make the model version 1 of registered model REGISTERED, aliased production."""
    with httpx.Client(base_url=base, timeout=30, headers=headers) as c:
        c.post("/registered-models", json={"name": REGISTERED}).raise_for_status()
        r = c.post(f"/registered-models/{REGISTERED}/versions", json={"model_id": model_id})
        r.raise_for_status()
        r = c.put(f"/registered-models/{REGISTERED}/aliases/production", json={"version": 1})
        r.raise_for_status()


def batches(
    args: argparse.Namespace,
    svc: str,
    model_id: int,
    names: list[str],
    X: np.ndarray,
    headers: dict[str, str],
) -> None:
    n, d = X.shape
    rng = np.random.default_rng(0)
    B = X[rng.integers(0, n, BATCH_ROWS)]  # wdbc rows as written in the file
    big = json.dumps({"model_id": model_id, "instances": B.tolist()}).encode()
    header = ",".join(names)
    csv = (header + "\n" + "\n".join(",".join(repr(v) for v in row) for row in B.tolist())
           + "\n").encode()
    w = rng.normal(size=d)
    t0 = time.perf_counter()
    for _ in range(10):
        B @ w + 0.5
    anchor = (time.perf_counter() - t0) / 10
    with httpx.Client(base_url=svc, timeout=120, headers=headers) as c:
        tj, out = timed_post(
            c, "/predict", args.repeat, content=big,
            headers={"Content-Type": "application/json"},
        )
        assert out["n"] == BATCH_ROWS, out.get("n")
        tc, out = timed_post(
            c, "/predict/file", args.repeat,
            files={"file": ("batch.csv", csv)}, data={"model_id": str(model_id)},
        )
        assert out["n"] == BATCH_ROWS, out.get("n")
    print(f"\nbatch of {BATCH_ROWS} rows x {d} features (end to end, {args.repeat} runs)")
    print(f"anchor: numpy decision function {anchor * 1e3:.2f} ms")
    print(f"/predict JSON ({len(big) / 1e6:.1f} MB): "
          + ", ".join(f"{t:.3f}" for t in tj)
          + f" s; best {min(tj):.3f} s (goal <= 1.0 s), {min(tj) / anchor:.0f}x anchor")
    print(f"/predict/file CSV ({len(csv) / 1e6:.1f} MB): "
          + ", ".join(f"{t:.3f}" for t in tc)
          + f" s; best {min(tc):.3f} s (goal <= 0.7 s), {min(tc) / anchor:.0f}x anchor")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_bare":
        run_bare(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
