"""Benchmark: one-row /predict's tail in process, against a bare route in the same run (issue 30).

    .venv/bin/python bench/serve_inprocess.py                      # SQLite (a temporary file)
    .venv/bin/python bench/serve_inprocess.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
    .venv/bin/python bench/serve_inprocess.py --requests 6000 --concurrency 8

No HTTP server and no wrk: the ASGI app is called directly by ``--concurrency`` coroutines on
one event loop (keys off, the prediction log on, the default recheck window: 1 s), after a
warm-up, then the same for a bare FastAPI app whose one POST route validates the same body
(``PredictRequest``). Prints, per side, the process CPU per request and the latency quantiles
(p50, p99, p99.9, max), their ratios, and how many of the service's requests went to a thread
for a check (``fast``: the model or reference; ``check``: the key or open state): a hop is a
network round trip on PostgreSQL, and under load a thread waits for the interpreter while the
loop is busy. The PostgreSQL database given is emptied first.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [
    p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
]

import anyio.to_thread  # noqa: E402

from app.predict.schemas import PredictRequest  # noqa: E402

HOPS: dict[str, int] = {}


def _count_hops() -> None:
    run_sync = anyio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(fn, "__name__", "")
        if name in ("fast", "check"):
            HOPS[name] = HOPS.get(name, 0) + 1
        return await run_sync(fn, *args, **kwargs)

    anyio.to_thread.run_sync = counted


def _prepared(url: str) -> tuple[Any, bytes]:
    """The service app on ``url`` (emptied, migrated) with one trained model, and the body."""
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.core.db import make_engine, upgrade_to_head
    from app.core.orm import Base
    from app.jobs.worker import Worker
    from app.main import create_app
    from tests.app.support import blobs, trained_model

    upgrade_to_head(url)
    engine = make_engine(url)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    engine.dispose()
    settings = Settings(database_url=url, _env_file=None, worker_poll_interval=0.05)
    with TestClient(create_app(settings)) as client:
        model = trained_model(client, Worker(settings))
    row = blobs()[0][0].tolist()
    body = f'{{"model_id": {model["id"]}, "instances": [{row}]}}'.encode()
    return create_app(settings), body


def _bare() -> Any:
    from fastapi import FastAPI

    bare = FastAPI()

    @bare.post("/predict")
    def predict(request: PredictRequest) -> dict:
        return {"model_id": request.model_id, "n": 1}

    return bare


async def _one(app: Any, body: bytes) -> None:
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"host", b"bench"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/predict", "raw_path": b"/predict",
             "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {}}  # fmt: skip
    await app(scope, receive, send)
    assert sent[0]["status"] == 200, sent


async def _side(app: Any, body: bytes, n: int, concurrency: int) -> dict[str, float]:
    for _ in range(300):
        await _one(app, body)
    latencies: list[float] = []

    async def client() -> None:
        for _ in range(n // concurrency):
            t0 = time.perf_counter()
            await _one(app, body)
            latencies.append(time.perf_counter() - t0)

    cpu = time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    cpu = (time.process_time() - cpu) / len(latencies)
    latencies.sort()

    def q(f: float) -> float:
        return latencies[int(f * (len(latencies) - 1))] * 1e3

    return {"cpu_us": cpu * 1e6, "p50": q(0.5), "p99": q(0.99), "p999": q(0.999),
            "max": latencies[-1] * 1e3}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--postgres", help="a PostgreSQL URL (emptied); default: SQLite")
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.postgres or f"sqlite:///{tmp}/bench.db"
        service, body = _prepared(url)
        _count_hops()
        try:
            ours = asyncio.run(_side(service, body, args.requests, args.concurrency))
            hops = dict(HOPS)
            bare = asyncio.run(_side(_bare(), body, args.requests, args.concurrency))
        finally:
            from app.main import shut_down

            shut_down(service)
    print(f"one-row /predict in process, {args.concurrency} concurrent, {args.requests} "
          f"requests a side, {'PostgreSQL' if args.postgres else 'SQLite'}, keys off")  # fmt: skip
    print("side       CPU µs/req   p50 ms   p99 ms  p99.9 ms   max ms")
    for name, side in (("service", ours), ("bare", bare)):
        print(f"{name:<10} {side['cpu_us']:>10.0f} {side['p50']:>8.2f} {side['p99']:>8.2f} "
              f"{side['p999']:>9.2f} {side['max']:>8.1f}")  # fmt: skip
    print(f"bare/service CPU per request: {bare['cpu_us'] / ours['cpu_us']:.2f}; p99 service "
          f"{ours['p99']:.1f} ms (goal <= 15 ms), p99.9 {ours['p999']:.1f} ms")  # fmt: skip
    print(f"service requests that went to a thread for a check: {hops or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
