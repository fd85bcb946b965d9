"""Training jobs beside the library's own fit, on SQLite and PostgreSQL (issue 30).

    .venv/bin/python bench/train_job.py                        # 1,000,000 x 28, both databases
    .venv/bin/python bench/train_job.py --rows 100000 --databases sqlite
    .venv/bin/python bench/train_job.py \\
        --postgres-url postgresql+psycopg://postgres@127.0.0.1:5432/test --repeat 3

Data: dense synthetic rows of 28 uniform features on a 4-decimal grid (HIGGS's shape) and a 0/1
label from a noisy linear rule, written once as CSV (``--csv``; about 198 bytes a row, so 1M rows
stay under the default 200 MiB upload limit). Per database, ``msvmav migrate`` then
``msvmav serve --workers 1`` run on a fresh database (a temporary SQLite file, or a scratch
PostgreSQL database ``msvmav_t_main_<random>`` created next to ``--postgres-url`` and dropped
at the end), the CSV is uploaded once (POST /datasets, not timed), then ``--repeat`` rounds
alternate:

* **job**: POST /train (``{"dataset_id": …}`` plus ``--calibration``/``--test-fraction`` when
  given: the service's defaults otherwise — linear MSVMAv, min-max scaling, sigmoid calibration,
  no hold-out) until GET /jobs/{id} reads ``succeeded``: this process's wall time, polling every
  0.1 s (the record's created_at -> finished_at is printed beside it). It includes the queue
  wait (an idle worker looks every ``MSVMAV_WORKER_POLL_INTERVAL``, 1 s, and on PostgreSQL is
  woken by the job's NOTIFY at once), the worker's load of
  the stored arrays, the split, the scaling, the fit, the model's summary and its save. Before
  the rounds one untimed job on the first 2,000 rows warms the worker up (its first job imports
  the solver), as a long-lived worker is.
* **library fit** (the anchor), in this process: ``pandas.read_csv`` of the same CSV, the
  worker's split (``solver.protocol.split_indices`` with the job's ``test_fraction`` and seed:
  the same training rows), ``MinMaxScaling`` on them (the job's scaling), then
  ``MSVMAv(kernel=…, **estimator_params, random_state=seed).fit(X_train, y_train)`` with the
  job's resolved ``params.estimator_params`` (calibration included): the same parameters. Only
  the fit is the anchor; the read, split and scaling are shown beside it ("read+fit": all four).

The table gives medians over the rounds: job s, library fit s, ratio job / fit (goal <= 1.3), and
read+fit s with the ratio job / read+fit. Each job's phases come from its record: queued
(created_at -> started_at), in worker (started_at -> finished_at) and the fit inside it
(``result.fit_seconds``, the same ``est.fit`` call the anchor times); "rest" (in worker - fit) is
load + split + scaling + summary + save. As a check that both sides fitted the same model, the
largest difference between the job's weights (GET /models/{id}) and the anchor's is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

# This file's folder holds modules named like the package's: keep it off the path.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [
    p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
]

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._api import live_api  # noqa: E402
from tests.app.support import create_postgres_database, drop_postgres_database  # noqa: E402

N_FEATURES = 28
GOAL = 1.3
POLL_SECONDS = 0.1  # GET /jobs/{id}: each poll costs the API (and the 2 cores) a little
WARM_UP_ROWS = 2_000


def write_csv(path: Path, n_rows: int, seed: int = 0) -> None:
    """Header ``f0..f27,y``; features k/10000 (k uniform in 0..9999) written as ``0.dddd``; label
    1 when a fixed linear rule plus Gaussian noise is positive. Built as bytes, a block at a
    time."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=N_FEATURES)
    with path.open("wb") as out:
        out.write((",".join(f"f{j}" for j in range(N_FEATURES)) + ",y\n").encode())
        for start in range(0, n_rows, 100_000):
            n = min(100_000, n_rows - start)
            k = rng.integers(0, 10_000, size=(n, N_FEATURES))
            score = (k / 10_000 - 0.5) @ w + rng.normal(scale=0.5, size=n)
            line = np.empty((n, N_FEATURES, 7), dtype=np.uint8)
            line[:, :, 0], line[:, :, 1], line[:, :, 6] = ord("0"), ord("."), ord(",")
            for place in range(4):
                line[:, :, 5 - place] = ord("0") + (k // 10**place) % 10
            tail = np.empty((n, 2), dtype=np.uint8)
            tail[:, 0] = ord("0") + (score > 0)
            tail[:, 1] = ord("\n")
            out.write(np.concatenate([line.reshape(n, -1), tail], axis=1).tobytes())


@contextmanager
def database(kind: str, admin_url: str, tmp: Path) -> Iterator[str]:
    """A fresh database's URL: a SQLite file in ``tmp``, or a scratch PostgreSQL database next
    to ``admin_url``, dropped on exit."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'bench.db'}"
        return
    url = create_postgres_database(admin_url)
    try:
        yield url
    finally:
        drop_postgres_database(admin_url, url)


@contextmanager
def service(database_url: str) -> Iterator[httpx.Client]:
    """A client of ``msvmav serve --workers 1`` on ``database_url`` (migrated first); stopped
    on exit."""
    with live_api({"MSVMAV_DATABASE_URL": database_url, "MSVMAV_LOG_LEVEL": "WARNING"}, 3600,
                  ("--workers", "1")) as (client, _pid):
        yield client


def upload(client: httpx.Client, path: Path) -> dict[str, Any]:
    """POST /datasets of the CSV (label ``y``); the dataset's record."""
    with path.open("rb") as f:
        r = client.post("/datasets", files={"file": (path.name, f, "text/csv")},
                        data={"label": "y"})
    if r.status_code != 201:
        raise SystemExit(f"upload answered {r.status_code}: {r.text[:500]}")
    return r.json()


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def run_job(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """POST /train, poll GET /jobs/{id} until it ends; the job record with ``wall`` (seconds from
    the POST to reading ``succeeded``), ``span`` (the record's created_at -> finished_at) and its
    phases (``queued``, ``in_worker``, ``fit``)."""
    start = time.perf_counter()
    r = client.post("/train", json=body)
    if r.status_code != 202:
        raise SystemExit(f"/train answered {r.status_code}: {r.text[:500]}")
    job_id = r.json()["id"]
    while True:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(POLL_SECONDS)
    wall = time.perf_counter() - start
    if job["status"] != "succeeded":
        raise SystemExit(f"job {job_id} {job['status']}: {job.get('error')}")
    return {**job, "wall": wall,
            "span": _seconds(job["created_at"], job["finished_at"]),
            "queued": _seconds(job["created_at"], job["started_at"]),
            "in_worker": _seconds(job["started_at"], job["finished_at"]),
            "fit": job["result"]["fit_seconds"]}


def library_fit(path: Path, params: dict[str, Any]) -> dict[str, Any]:
    """The anchor: read the CSV with pandas, split and scale as the worker does, then
    ``MSVMAv(...).fit`` with the job's resolved parameters. Seconds of each step; the weights."""
    import pandas as pd

    from solver import MSVMAv
    from solver.protocol import split_indices, split_rows
    from solver.scaling import MinMaxScaling

    t0 = time.perf_counter()
    frame = pd.read_csv(path)
    y = frame.pop("y").to_numpy()
    X = frame.to_numpy(dtype=np.float64)
    del frame
    t1 = time.perf_counter()
    train_idx, test_idx = split_indices(y, params.get("test_fraction"), params.get("seed"))
    X_train, _ = split_rows(X, train_idx, test_idx, overwrite=True)
    if params.get("scaling", "minmax") == "minmax":
        X_train = MinMaxScaling.fit(X_train).transform(X_train, copy=False)
    chosen = dict(params["estimator_params"])
    est = MSVMAv(kernel=chosen.pop("kernel", "linear"), **chosen,
                 random_state=params.get("seed"))
    t2 = time.perf_counter()
    est.fit(X_train, y[train_idx])
    t3 = time.perf_counter()
    coef = np.hstack([np.ravel(est.coef_), np.ravel(est.intercept_)])
    return {"read": t1 - t0, "prepare": t2 - t1, "fit": t3 - t2, "total": t3 - t0, "coef": coef}


def job_weights(client: httpx.Client, model_id: int) -> np.ndarray:
    """The job's model's coef and intercept (scaled feature space), as the anchor's."""
    weights = client.get(f"/models/{model_id}").json()["weights"]
    return np.hstack([np.ravel(weights["coef"]), np.ravel(weights["intercept"])])


def warm_up(client: httpx.Client, args: argparse.Namespace, tmp: Path) -> None:
    """One untimed job on the CSV's first WARM_UP_ROWS rows: the worker process's first job
    pays its imports (solver, scikit-learn) and first allocations, which a long-lived worker
    pays once; the timed rounds measure the jobs after it."""
    head = tmp / "warm_up.csv"
    with args.csv.open("rb") as src, head.open("wb") as out:
        for _, line in zip(range(WARM_UP_ROWS + 1), src, strict=False):
            out.write(line)
    job = run_job(client, train_body(args, upload(client, head)["id"]))
    print(f"  warm-up job ({WARM_UP_ROWS} rows, untimed): {job['wall']:.2f} s", flush=True)


def train_body(args: argparse.Namespace, dataset_id: int) -> dict[str, Any]:
    """The /train body: the dataset, plus only the fields given on the command line."""
    body: dict[str, Any] = {"dataset_id": dataset_id}
    if args.calibration is not None:
        body["calibration"] = args.calibration
    if args.test_fraction is not None:
        body["test_fraction"] = args.test_fraction
    return body


def bench_database(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """Serve on a fresh ``kind`` database, upload the CSV, alternate job and anchor
    ``args.repeat`` times; every round's figures."""
    with tempfile.TemporaryDirectory(prefix="msvmav-bench-train-") as name:
        tmp = Path(name)
        with database(kind, args.postgres_url, tmp) as url, service(url) as client:
            t0 = time.perf_counter()
            dataset = upload(client, args.csv)
            print(f"\n{kind}: uploaded {dataset['n_rows']} x {dataset['n_features']} in "
                  f"{time.perf_counter() - t0:.1f} s (not timed below)", flush=True)
            warm_up(client, args, tmp)
            jobs, anchors = [], []
            for i in range(args.repeat):
                job = run_job(client, train_body(args, dataset["id"]))
                anchor = library_fit(args.csv, job["params"])
                gap = np.max(np.abs(job_weights(client, job["model_id"]) - anchor["coef"]))
                jobs.append(job)
                anchors.append(anchor)
                print(f"  round {i + 1}: job {job['wall']:.2f} s (record {job['span']:.2f}: "
                      f"queued {job['queued']:.2f}, "
                      f"in worker {job['in_worker']:.2f}, of which fit {job['fit']:.2f}); "
                      f"library: read {anchor['read']:.2f} + split/scale "
                      f"{anchor['prepare']:.2f} + fit {anchor['fit']:.2f} s; "
                      f"max |weights job - library| {gap:.1e}", flush=True)
            print(f"  job message: {jobs[-1]['message']}")
    return {"database": "SQLite" if kind == "sqlite" else "PostgreSQL",
            "rows": dataset["n_rows"], "jobs": jobs, "anchors": anchors}


def print_table(results: list[dict[str, Any]], repeat: int) -> None:
    """One line per database: medians over the rounds, the ratios and the job's phases."""
    print(f"\nmedians of {repeat} alternating rounds; ratio = job / library fit (goal <= {GOAL})")
    print(f"{'database':10} {'rows':>9} {'job s':>7} {'fit s':>7} {'ratio':>6} "
          f"{'read+fit s':>10} {'ratio':>6} | {'queued':>6} {'worker':>6} {'job fit':>7} "
          f"{'rest':>6}")
    for res in results:
        med = {key: statistics.median(j[key] for j in res["jobs"])
               for key in ("wall", "queued", "in_worker", "fit")}
        fit = statistics.median(a["fit"] for a in res["anchors"])
        total = statistics.median(a["total"] for a in res["anchors"])
        ratio = med["wall"] / fit
        print(f"{res['database']:10} {res['rows']:9d} {med['wall']:7.2f} {fit:7.2f} "
              f"{ratio:6.2f} {total:10.2f} {med['wall'] / total:6.2f} | {med['queued']:6.2f} "
              f"{med['in_worker']:6.2f} {med['fit']:7.2f} {med['in_worker'] - med['fit']:6.2f}"
              f"  {'ok' if ratio <= GOAL else 'over the goal'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--csv", type=Path, default=None,
                    help="the data file (written when missing); default "
                    "/tmp/msvmav_train_<rows>.csv")
    ap.add_argument("--repeat", type=int, default=2, help="alternating job/anchor rounds")
    ap.add_argument("--databases", default="sqlite,postgresql")
    ap.add_argument("--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
                    help="an existing database; the scratch one is created next to it")
    ap.add_argument("--calibration", choices=("sigmoid", "isotonic", "none"), default=None,
                    help="sent with /train (default: not sent, the service's default)")
    ap.add_argument("--test-fraction", type=float, default=None,
                    help="sent with /train (default: not sent, no hold-out)")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if unknown := set(kinds) - {"sqlite", "postgresql"}:
        raise SystemExit(f"unknown databases {sorted(unknown)}: use sqlite and/or postgresql")
    args.csv = args.csv or Path(f"/tmp/msvmav_train_{args.rows}.csv")
    if not args.csv.is_file():
        t0 = time.perf_counter()
        write_csv(args.csv, args.rows)
        print(f"wrote {args.csv} ({args.csv.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s")
    results = [bench_database(args, kind) for kind in kinds]
    print_table(results, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
