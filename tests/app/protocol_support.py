"""Models trained in process on the test database and a live ``msvmav serve`` on it, for the
protocol tests (Open Inference Protocol, MLflow scoring)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import tritonclient.http as triton
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import make_engine
from app.jobs.worker import Worker
from app.main import create_app
from tests.app.support import blobs, run_jobs, submit, to_csv, upload
from tests.live_server import LiveServer, live_server

ADMIN_KEY = "msv_protocol-admin-key-0123456789abcdef"


@dataclass
class Served:
    server: LiveServer
    http: httpx.Client  # the live server, with the admin key
    binary: int  # model ids: two string classes, numeric features
    multi: int  # three integer classes, numeric features
    mixed: int  # a categorical column among numeric ones
    binary2: int  # another fit of `binary`'s data
    name: str  # registered: version 1 `binary` (its production alias), version 2 `binary2`
    X: np.ndarray  # rows for the numeric models (3 features)
    mixed_rows: list[list[Any]]  # rows for the mixed model: x0, color, x1
    mixed_names: list[str]


def mixed_csv(n: int = 90, seed: int = 1) -> tuple[bytes, list[list[Any]]]:
    """x0, color (categorical), x1, y: the class follows x0 and the colour."""
    rng = np.random.default_rng(seed)
    colors = np.array(["red", "green", "blue"])[np.arange(n) % 3]
    y = np.where((np.arange(n) % 2) == 0, "yes", "no")
    x0 = np.where(y == "yes", 3.0, -3.0) + rng.normal(size=n)
    x1 = rng.normal(size=n)
    out = io.StringIO()
    out.write("x0,color,x1,y\n")
    rows = []
    for a, c, b, label in zip(x0, colors, x1, y, strict=True):
        out.write(f"{a:.6f},{c},{b:.6f},{label}\n")
        rows.append([round(float(a), 6), str(c), round(float(b), 6)])
    return out.getvalue().encode(), rows


def _train(client: TestClient, worker: Worker, content: bytes, **params: Any) -> int:
    dataset = upload(client, content)
    job = submit(client, dataset["id"], **{"max_iter": 30, **params})
    run_jobs(worker)  # (and any job an earlier module of this process left queued)
    done = client.get(f"/jobs/{job['id']}").json()
    assert done["status"] == "succeeded", done
    return done["model_id"]


def key() -> dict[str, str]:
    """The admin key's header, a new dict each call: tritonclient adds its
    Inference-Header-Content-Length to the dict it is given."""
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


@contextmanager
def triton_client(served: Served) -> Iterator[triton.InferenceServerClient]:
    """The stock tritonclient's HTTP client on the served models' server."""
    client = triton.InferenceServerClient(served.server.url.removeprefix("http://"))
    try:
        yield client
    finally:
        client.close()


@contextmanager
def served_models(database_url: str, tmp_path: Path, **env_extra: str) -> Iterator[Served]:
    """Three models trained in process, then ``msvmav serve`` (keys required, and the
    ``env_extra`` settings) on their database."""
    settings = Settings(database_url=database_url, worker_poll_interval=0.05, _env_file=None)
    engine = make_engine(database_url)
    try:
        with TestClient(create_app(settings)) as client:
            worker = Worker(settings, engine=engine)
            X, y = blobs(n=60, d=3)
            binary = _train(client, worker, to_csv(X, y))
            binary2 = _train(client, worker, to_csv(X, y), alpha=1, beta=1)
            X3, y3 = blobs(n=90, d=3, classes=(1, 2, 3))
            multi = _train(client, worker, to_csv(X3, y3))
            content, rows = mixed_csv()
            mixed = _train(client, worker, content)
    finally:
        engine.dispose()
    env = {"MSVMAV_DATABASE_URL": database_url, "MSVMAV_ADMIN_KEY": ADMIN_KEY, **env_extra}
    with live_server(tmp_path, **env) as server:
        headers = key()
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            name = f"blobs-{binary}"  # a new name on the session's database
            r = http.post("/registered-models", json={"name": name})
            assert r.status_code == 201, r.text
            for model_id in (binary, binary2):
                r = http.post(f"/registered-models/{name}/versions", json={"model_id": model_id})
                assert r.status_code == 201, r.text
            r = http.put(f"/registered-models/{name}/aliases/production", json={"version": 1})
            assert r.status_code == 200, r.text
            yield Served(
                server=server,
                http=http,
                binary=binary,
                multi=multi,
                mixed=mixed,
                binary2=binary2,
                name=name,
                X=np.vstack([X[:7], X3[:5]]),
                mixed_rows=rows[:11],
                mixed_names=["x0", "color", "x1"],
            )


def predict(http: httpx.Client, model_id: int, instances: list[Any]) -> dict[str, Any]:
    """/predict's answer, the reference every protocol answer is compared with."""
    r = http.post("/predict", json={"model_id": model_id, "instances": instances})
    assert r.status_code == 200, r.text
    return r.json()


def decisions(answer: dict[str, Any]) -> np.ndarray:
    """/predict's decision values: (n,) for two classes, (n, k) one-vs-rest."""
    preds = answer["predictions"]
    if preds[0]["decision_values"] is not None:
        return np.array([p["decision_values"] for p in preds])
    return np.array([p["decision_value"] for p in preds])
