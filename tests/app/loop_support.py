"""Helpers of the loop's tests (issue 48): a registered linear model on blobs, predictions
through its production alias with ids, their feedback, and the writers flushed (no sleeps:
``flush`` returns once the queued rows are written)."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from app.monitoring import inputs, shadow
from app.monitoring import log as prediction_log
from tests.app.support import blobs, run_jobs, to_csv, upload

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
