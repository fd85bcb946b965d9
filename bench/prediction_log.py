"""Benchmark (issue 28): the prediction log's writer against /predict's rate, and the read
latencies of /feedback and the monitoring report under that load.

    .venv/bin/python bench/prediction_log.py                      # SQLite, 3 clients, 20 s
    .venv/bin/python bench/prediction_log.py --duration 30 --clients 3 --rows 1000
    .venv/bin/python bench/prediction_log.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test

Starts ``msvmav serve`` (one API process) and one worker on a temporary SQLite database (or the
given, emptied PostgreSQL database), trains a linear MSVMAv on 30-feature blobs, then puts
``--clients`` threads of ``--rows``-row /predict requests (ids of their own) on it for
``--duration`` seconds, with ``MSVMAV_PREDICTION_LOG_MAX_ROWS=30000`` (issue 28's setting). The
anchor is /predict's own rate in the same run: the writer's sustained rows/s (the log's
``msvmav_prediction_log_written_total`` over the load) divided by the rows/s answered 200 (a
ratio >= 1 keeps up; a chunk still being written when the load stops counts against it), the
backlog (``pending_rows``) when the load stops and how long it takes to drain, and the
writer's capacity: rows written per second spent writing
(``msvmav_prediction_log_flush_seconds_sum``), against /predict's rate. Meanwhile, once a
second, a /feedback for 100 ids answered earlier and a monitoring report are timed (the
issue's target: each within 1 s), with the backlog each says it saw, beside the same reads with
no load after the backlog drained (the anchor: what the read costs by itself), and the report
computed in the bench's own process on the same window (``model_report``: no HTTP); and the API's
RSS (/metrics) is sampled: its peak. Timings on a shared machine are noisy: run it twice.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [
    p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
]

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from tests.app.faults_support import serve_api  # noqa: E402
from tests.app.support import blobs, start_worker_process, stop_workers, to_csv  # noqa: E402


def _metrics(c: httpx.Client) -> dict[str, float]:
    out = {}
    for line in c.get("/metrics").text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


class Load:
    """``clients`` threads of /predict, each request ``rows`` rows with ids of its own."""

    def __init__(self, url: str, model_id: int, clients: int, rows: int) -> None:
        self.url, self.model_id, self.rows = url, model_id, rows
        self.answered = [0] * clients
        self.failed = [0] * clients
        self.stop = threading.Event()
        self.ids: list[str] = []  # the first request's ids of each client (for /feedback)
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(clients)]

    def _run(self, client: int) -> None:
        X = blobs(n=self.rows, d=30, seed=client)[0].tolist()
        with httpx.Client(base_url=self.url, timeout=120) as c:
            k = 0
            while not self.stop.is_set():
                ids = [f"c{client}-{k}-{i}" for i in range(self.rows)]
                r = c.post("/predict", json={"model_id": self.model_id, "instances": X, "ids": ids})
                if r.status_code == 200:
                    self.answered[client] += self.rows
                    if k == 0:
                        self.ids += ids[:100]
                else:
                    self.failed[client] += 1
                k += 1


def _reads(c: httpx.Client, load: Load, model_id: int, out: dict[str, list]) -> None:
    """Once a second: a /feedback of 100 answered ids and a monitoring report, timed."""
    while not load.stop.is_set():
        _reads_once(c, load, model_id, out)
        load.stop.wait(1.0)


def _reads_once(c: httpx.Client, load: Load, model_id: int, out: dict[str, list]) -> None:
    """A /feedback of 100 answered ids and a monitoring report, timed; the API's RSS."""
    if load.ids:
        ids = load.ids[:100]
        t = time.perf_counter()
        r = c.post(
            "/feedback", json={"model_id": model_id, "ids": ids, "labels": ["neg"] * len(ids)}
        )
        out["feedback"].append((time.perf_counter() - t, r.status_code, _pending(r)))
    t = time.perf_counter()
    r = c.get(f"/models/{model_id}/monitoring")
    out["report"].append((time.perf_counter() - t, r.status_code, _pending(r)))
    out["rss"].append(_metrics(c).get("process_resident_memory_bytes", 0.0))


def _report_in_process(url: str, model_id: int) -> list[tuple[float, int]]:
    """The same report computed in this process (``model_report``, no HTTP, no load) on the
    window the load left: (seconds, rows in the window), five times after a warm-up."""
    from app.core.config import Settings
    from app.core.db import make_engine
    from app.core.runtime import Runtime
    from app.monitoring.report import model_report

    runtime = Runtime(make_engine(url), Settings(database_url=url))
    try:
        out = []
        for i in range(6):
            with runtime.sessions() as session:
                t = time.perf_counter()
                body = model_report(session, model_id, None, None)
                if i:
                    out.append((time.perf_counter() - t, body["live"]["n"]))
        return out
    finally:
        runtime.close()


def _pending(r: httpx.Response) -> int | None:
    try:
        return r.json()["log"]["pending_rows"]
    except (ValueError, KeyError, TypeError):
        return None


def _train(c: httpx.Client) -> int:
    ds = c.post("/datasets", files={"file": ("d.csv", to_csv(*blobs(n=400, d=30)))})
    assert ds.status_code == 201, ds.text
    job = c.post("/train", json={"dataset_id": ds.json()["id"], "max_iter": 50}).json()
    for _ in range(1200):
        body = c.get(f"/jobs/{job['id']}").json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            assert body["status"] == "succeeded", body
            return body["model_id"]
        time.sleep(0.1)
    raise SystemExit("training did not finish")


def _summary(name: str, samples: list[tuple[float, int, int | None]]) -> str:
    if not samples:
        return f"{name}: no sample"
    t = [s[0] for s in samples]
    codes = sorted({s[1] for s in samples})
    pending = [s[2] for s in samples if s[2] is not None]
    return (
        f"{name}: n={len(t)} p50={statistics.median(t):.3f}s max={max(t):.3f}s "
        f"within 1 s: {sum(x <= 1.0 for x in t)}/{len(t)} status={codes} "
        f"pending_rows said: max {max(pending) if pending else None}"
    )


def run(url: str, args: argparse.Namespace, tmp: Path) -> None:
    env = {
        "MSVMAV_PREDICTION_LOG_MAX_ROWS": "30000",
        "MSVMAV_PREDICTION_LOG_SPOOL_DIR": str(tmp / "spool"),
    }
    worker = start_worker_process(url, tmp, env={"MSVMAV_WORKER_POLL_INTERVAL": "0.1"})
    try:
        with serve_api(url, tmp, **env) as api, httpx.Client(base_url=api.url, timeout=120) as c:
            model_id = _train(c)
            load = Load(api.url, model_id, args.clients, args.rows)
            reads: dict[str, list] = {"feedback": [], "report": [], "rss": []}
            reader = threading.Thread(target=_reads, args=(c, load, model_id, reads))
            before = _metrics(c)
            t0 = time.perf_counter()
            for t in load.threads:
                t.start()
            reader.start()
            time.sleep(args.duration)
            at_stop = _metrics(c)
            load.stop.set()
            elapsed = time.perf_counter() - t0
            for t in (*load.threads, reader):
                t.join()
            t1 = time.perf_counter()
            while _metrics(c)["msvmav_prediction_log_pending_rows"] > 0:
                if time.perf_counter() - t1 > 600:
                    break
                time.sleep(0.2)
            drained = time.perf_counter() - t1
            after = _metrics(c)
            idle: dict[str, list] = {"feedback": [], "report": [], "rss": []}
            for _ in range(3):  # the anchor: the same reads with no load
                _reads_once(c, load, model_id, idle)
            idle["in_process"] = _report_in_process(url, model_id)
    finally:
        stop_workers([worker])
    _report(args, load, elapsed, drained, (before, at_stop, after), (reads, idle))


def _report(
    args: argparse.Namespace,
    load: Load,
    elapsed: float,
    drained: float,
    metrics: tuple[dict[str, float], dict[str, float], dict[str, float]],
    samples: tuple[dict[str, list], dict[str, list]],
) -> None:
    """Print the run's figures (see the module's docstring)."""
    before, at_stop, after = metrics
    reads, idle = samples
    key = "msvmav_prediction_log_written_total"
    answered = sum(load.answered)
    predict_rate = answered / elapsed
    writer_rate = (at_stop[key] - before[key]) / args.duration
    print(
        f"/predict: {args.clients} clients x {args.rows} rows, {elapsed:.1f} s: {answered} "
        f"rows answered 200 ({predict_rate:,.0f} rows/s), {sum(load.failed)} not 200"
    )
    print(
        f"log writer: {writer_rate:,.0f} rows/s written during the load; "
        f"ratio writer/predict = {writer_rate / predict_rate:.2f}"
    )
    print(
        f"backlog when the load stopped: {at_stop['msvmav_prediction_log_pending_rows']:.0f} "
        f"rows; drained in {drained:.1f} s; written {after[key] - before[key]:.0f}, dropped "
        f"{after['msvmav_prediction_log_dropped_total']:.0f}"
    )
    print(_summary("feedback (100 ids)", reads["feedback"]))
    print(_summary("  the same, no load", idle["feedback"]))
    print(_summary("monitoring report", reads["report"]))
    print(_summary("  the same, no load", idle["report"]))
    inproc = idle.get("in_process") or []
    if inproc:
        print(
            f"  the same in-process (model_report, no HTTP, no load) on its {inproc[0][1]} rows: "
            f"median {statistics.median(t for t, _ in inproc):.3f}s of {len(inproc)}"
        )
    print(f"API RSS: peak {max(reads['rss'] or [0]) / 2**20:.0f} MiB")
    flush = after["msvmav_prediction_log_flush_seconds_sum"] / max(
        after["msvmav_prediction_log_flush_seconds_count"], 1
    )
    busy = after["msvmav_prediction_log_flush_seconds_sum"]
    capacity = (after[key] - before[key]) / max(busy, 1e-9)
    print(
        f"writes: {after['msvmav_prediction_log_flush_seconds_count']:.0f} chunks, "
        f"mean {flush * 1000:.1f} ms each; the writer's capacity (rows / seconds spent "
        f"writing) {capacity:,.0f} rows/s = {capacity / predict_rate:.1f}x /predict's rate"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--postgres", help="an empty PostgreSQL database's URL (migrated here)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="msvmav-bench-log-") as d:
        tmp = Path(d)
        if args.postgres:
            from tests.app.support import create_postgres_database, drop_postgres_database

            url = create_postgres_database(args.postgres)
        else:
            url = f"sqlite:///{tmp / 'bench.db'}"
        from app.core.db import upgrade_to_head

        try:
            upgrade_to_head(url)
            run(url, args, tmp)
        finally:
            if args.postgres:
                drop_postgres_database(args.postgres, url)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
