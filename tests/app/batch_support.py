"""What the batch tests share (tests/app/test_batch.py, tests/app/test_batch_as_used.py): a mixed
model, its input frame, submitting a batch job, /predict of the same rows, running the job."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.app.support import blobs, run_jobs, trained_model

N_ROWS = 230  # 5 chunks of 50 (the last 30)


def _mixed_model(client, worker, classes=("a", "b", "c")) -> dict:
    """A 3-class model on two numeric features and one categorical (colour)."""
    X, y = blobs(n=150, d=2, classes=classes, seed=3)
    colours = np.asarray(["red", "green", "blue"])[np.arange(150) % 3]
    frame = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "colour": colours, "y": y})
    return trained_model(client, worker, frame.to_csv(index=False).encode(), max_iter=30)


def _input_frame(n: int = N_ROWS, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "key": [f"k{i:04d}" for i in range(n)],
        "x0": rng.normal(size=n).round(6) * 4,
        "x1": rng.normal(size=n).round(6) * 4,
        "colour": np.asarray(["red", "green", "blue"])[rng.integers(0, 3, n)],
        "note": [f"n{i}" for i in range(n)],
    })


def _submit(client, model_id: int, content: bytes, filename: str = "rows.csv", **form):
    data = {"model_id": str(model_id), "chunk_rows": "50", **form}
    return client.post("/batch-predictions", files={"file": (filename, content)}, data=data)


def _predict(client, model_id: int, frame: pd.DataFrame) -> dict:
    records = frame[["x0", "x1", "colour"]].to_dict("records")
    r = client.post("/predict", json={"model_id": model_id, "instances": records})
    assert r.status_code == 200, r.text
    return r.json()


def _wait_done(client, worker, job_id: int) -> dict:
    run_jobs(worker)
    return client.get(f"/jobs/{job_id}").json()
