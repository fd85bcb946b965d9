"""What the export tests share (test_export_onnx, test_export_bundle, test_export_bundle_hostile):
source models, the rows they are asked about, /predict's answers, and bundles taken apart and
put together."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models.orm import Model, ModelArray
from tests.app.support import blobs, run_jobs, submit, to_csv, upload

CATEGORICAL_CSV = "".join(
    ["x0,colour,x1,size,y\n"]
    + [
        f"{(i * 0.37) % 3 - 1:.3f},{('red', 'green', 'blue')[i % 3]},{(i * 1.3) % 5:.3f},"
        f"{('S', 'M', 'L')[(i // 3) % 3]},{('a', 'b', 'c')[(i + (i // 3)) % 3]}\n"
        for i in range(60)
    ]
)


def numeric_data(n_classes: int) -> tuple[bytes, np.ndarray]:
    """A small training CSV (string classes for two, integer classes for three) and query rows
    of which many fall outside the training ranges (the scaling's clip matters)."""
    classes = ("neg", "pos") if n_classes == 2 else (1, 2, 3)
    X, y = blobs(n=60, d=3, classes=classes, shift=3.0)
    rng = np.random.default_rng(7)
    queries = np.vstack([X[:10], rng.normal(size=(15, 3)) * 6.0])
    return to_csv(X, y), queries


def categorical_queries() -> list[list]:
    rng = np.random.default_rng(3)
    return [
        [
            float(rng.normal() * 2),
            str(rng.choice(["red", "green", "blue"])),
            float(rng.normal() * 4),
            str(rng.choice(["S", "M", "L"])),
        ]
        for _ in range(25)
    ]


def predict_answer(client, model_id: int, rows: list) -> dict:
    # One request id: the rows' default ids ("{request_id}:{row}") equal between answers.
    r = client.post(
        "/predict", json={"model_id": model_id, "instances": rows}, headers={"X-Request-ID": "a"}
    )
    assert r.status_code == 200, r.text
    return r.json()


def expected_of(answer: dict) -> tuple[list, np.ndarray]:
    preds = answer["predictions"]
    labels = [p["label"] for p in preds]
    decisions = [
        p["decision_value"] if p["decision_values"] is None else p["decision_values"] for p in preds
    ]
    return labels, np.asarray(decisions, dtype=np.float64)





def source_model(client, worker, kind) -> tuple[dict, list]:
    if kind == "categorical":
        return trained_model(client, worker, CATEGORICAL_CSV.encode(), kernel="rbf"), (
            categorical_queries()
        )
    content, queries = numeric_data(kind)
    return trained_model(client, worker, content), queries.tolist()


def export_bundle(client, model_id: int) -> bytes:
    r = client.get(f"/models/{model_id}/export", params={"format": "bundle"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/zip"
    return r.content


def import_bundle(client, content: bytes, name: str = "model.zip"):
    return client.post("/models/import", files={"file": (name, content)})


def rezip(
    content: bytes, change: Callable[[dict[str, bytes]], None], *, checksums: bool = True
) -> bytes:
    """The bundle with its members changed by ``change`` (name -> bytes, None removes);
    ``checksums``: recompute the manifest's, as a careful forger would."""
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    change(members)
    members = {n: b for n, b in members.items() if b is not None}
    if checksums:
        manifest["members"] = {
            n: {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}
            for n, b in members.items()
            if n != "manifest.json"
        }
        members["manifest.json"] = json.dumps(manifest).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    return out.getvalue()


def npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=allow_pickle)
    return out.getvalue()


def _counts(engine) -> tuple[int, int]:
    with Session(engine) as s:
        return (
            s.scalar(select(func.count()).select_from(Model)),
            s.scalar(select(func.count()).select_from(ModelArray)),
        )


@pytest.fixture
def linear_bundle(client, worker) -> bytes:
    model, _ = source_model(client, worker, 2)
    return export_bundle(client, model["id"])


def trained_model(client, worker, content: bytes | None = None, **fields) -> dict:
    """Upload (default: binary numeric data), train with the request ``fields`` (the
    algorithm's own defaults otherwise), return the model detail."""
    ds = upload(client, content if content is not None else numeric_data(2)[0])
    job = submit(client, ds["id"], **fields)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    return client.get(f"/models/{model_id}").json()
