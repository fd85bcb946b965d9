"""Helpers of the loop's tests (issue 48): a registered linear model on blobs, predictions
through its production alias with ids, their feedback, and the writers flushed (no sleeps:
``flush`` returns once the queued rows are written)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.jobs.worker import Worker
from app.loop import policies
from app.main import create_app
from app.monitoring import inputs, shadow
from app.monitoring import log as prediction_log
from app.monitoring.orm import PredictionInput
from tests.app.support import blobs, migrated_database, run_jobs, to_csv, upload
from tests.live_server import LiveServer, live_server

NAME = "credit"


def registered_linear(client: TestClient, worker, n: int = 200, seed: int = 0) -> dict:
    """Version 1 of NAME (production): linear MSVMAv, calibration none, on blobs."""
    X, y = blobs(n=n, seed=seed, shift=2.0)
    ds = upload(client, to_csv(X, y))
    r = client.post("/train", json={"dataset_id": ds["id"], "kernel": "linear", "alpha": 1,
                                    "beta": 0.25, "calibration": "none", "max_iter": 200,
                                    "tol": 1e-8, "register_as": NAME})
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    job = client.get(f"/jobs/{r.json()['id']}").json()
    r = client.put(f"/registered-models/{NAME}/aliases/production", json={"version": 1})
    assert r.status_code == 200, r.text
    return job


def flush(client: TestClient) -> None:
    """Every queued log, input and shadow row written."""
    runtime = client.app.state.runtime
    for part in (inputs.writer(runtime), prediction_log.writer(runtime)):
        if part is not None:
            part.flush()
    found = runtime.peek(shadow.SHADOW_SCORER)
    if found is not None:
        found.flush()


def predict(client: TestClient, X: np.ndarray, ids: list[str], ref: str = f"{NAME}") -> list:
    r = client.post("/predict", json={"model": ref, "instances": X.tolist(), "ids": ids})
    assert r.status_code == 200, r.text
    return [p["label"] for p in r.json()["predictions"]]


def feedback(client: TestClient, ids: list[str], labels: list, ref: str = NAME) -> dict:
    flush(client)
    r = client.post("/feedback", json={"model": ref, "ids": ids, "labels": list(labels)})
    assert r.status_code == 200, r.text
    return r.json()


POLICY = f"/registered-models/{NAME}/policy"
SHIFT = 3.0
AXIS = {"A": 0, "B": 1, "C": 2}  # where the positive class lies: the concept moves


def rows(concept: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n rows of 3 features: neg around 0, pos around SHIFT on the concept's axis."""
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, "neg", "pos")
    X = rng.normal(size=(n, 3))
    X[y == "pos", AXIS[concept]] += SHIFT
    return X, y


class Service:
    """The API (a TestClient of a new app on the test's database) and a worker, restartable."""

    def __init__(self, settings, engine) -> None:
        self.settings = settings.model_copy(update={"alerts": False})
        self.engine = engine
        self.client: TestClient | None = None
        self.worker = Worker(settings, engine=engine)
        self.counter = 0
        # the policies' clock (epoch seconds), moved by hand; ahead of the alert evaluator's
        # round below (which steps the policies too, the same loop: at its earlier time it
        # claims no round of theirs)
        self.now = time.time() + 4 * 3600

    def start(self) -> TestClient:
        self.client = TestClient(create_app(self.settings))
        self.client.__enter__()
        return self.client

    def restart(self) -> TestClient:
        assert self.client is not None
        self.client.__exit__(None, None, None)
        self.worker = Worker(self.settings, engine=self.engine)
        return self.start()

    def stream(self, concept: str, n: int, seed: int, flipped: bool = False) -> None:
        """n live rows predicted through NAME and fed back (their labels flipped: wrong)."""
        X, y = rows(concept, n, seed)
        ids = [f"live-{self.counter + i}" for i in range(n)]
        self.counter += n
        predict(self.client, X, ids)
        labels = np.where(y == "pos", "neg", "pos") if flipped else y
        feedback(self.client, ids, labels.tolist())
        flush(self.client)

    def step(self, seconds: float = 5.0) -> dict:
        self.now += seconds
        flush(self.client)
        policies.run_once(self.client.app.state.runtime, self.now)
        return self.client.get(POLICY).json()

    def aliases(self) -> dict:
        return self.client.get(f"/registered-models/{NAME}").json()["aliases"]

    def age_inputs(self) -> None:
        """The rows kept so far logged a day ago (so that a window leaves them out)."""
        with Session(self.engine) as session:
            session.execute(update(PredictionInput).values(
                created_at=datetime.now(UTC) - timedelta(days=1)))
            session.commit()


def started_service(settings, engine) -> Iterator[Service]:
    """A started ``Service`` for a fixture (``yield from``), its client closed afterwards."""
    svc = Service(settings, engine)
    svc.start()
    yield svc
    svc.client.__exit__(None, None, None)


def register_production(svc: Service, calibration: str = "none") -> None:
    """Version 1 of NAME: linear MSVMAv on 300 rows of concept A (``calibration``), with the
    production alias on it."""
    X, y = rows("A", 300, seed=0)
    ds = upload(svc.client, to_csv(X, y))
    r = svc.client.post("/train", json={
        "dataset_id": ds["id"], "kernel": "linear", "calibration": calibration, "max_iter": 300,
        "register_as": NAME})
    assert r.status_code == 202, r.text
    assert run_jobs(svc.worker) == ["succeeded"]
    assert svc.client.put(f"/registered-models/{NAME}/aliases/production",
                          json={"version": 1}).status_code == 200


class LiveSite:
    """``msvmav serve`` on one database (``url``) with ``env``, restartable: each start is a new
    process on the same database, in a directory of its own under ``tmp_path``."""

    def __init__(self, tmp_path: Path, url: str, env: dict[str, str]) -> None:
        self.tmp_path, self.url, self.env, self.runs, self.count = tmp_path, url, env, 0, 0
        self._cm = None
        self.server: LiveServer | None = None
        self.http = httpx.Client(timeout=60)

    def start(self) -> None:
        self.runs += 1
        directory = self.tmp_path / f"run{self.runs}"
        directory.mkdir()
        self._cm = live_server(directory, MSVMAV_DATABASE_URL=self.url, **self.env)
        self.server = self._cm.__enter__()

    def restart(self) -> None:
        self._cm.__exit__(None, None, None)
        self.start()

    def stop(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None
        self.http.close()

    def response(self, method: str, path: str, body=None, **kw) -> httpx.Response:
        """The answer to one request, which must be a success (below 300)."""
        r = self.http.request(method, self.server.url + path, json=body, **kw)
        assert r.status_code < 300, (path, r.status_code, r.text)
        return r


def running_site(make: Callable[[Path, str], LiveSite], backend: str,
                 tmp_path: Path) -> Iterator[LiveSite]:
    """A started site (``make(tmp_path, url)``) on a migrated database of ``backend``, for a
    fixture (``yield from``); stopped afterwards."""
    with migrated_database(backend, tmp_path) as url:
        site = make(tmp_path, url)
        site.start()
        try:
            yield site
        finally:
            site.stop()
