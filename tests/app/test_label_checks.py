"""The label must be a set of classes (at upload), and the training part must hold enough rows
of each class (at /train, before any job is queued)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import type_of_target
from sqlalchemy import func, select

from app.ingest.labels import MAX_CLASS_SHARE
from app.jobs.orm import Job
from tests.app.support import blobs, to_csv, upload


def _frame(y, n: int | None = None, seed: int = 0) -> bytes:
    n = len(y) if n is None else n
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "score": y})
    return frame.to_csv(index=False).encode()


def _refused(client, content: bytes, **form) -> dict:
    r = client.post("/datasets", files={"file": ("d.csv", content)}, data=form)
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["field"] == "label"
    return r.json()


def test_continuous_label_is_refused_naming_column_and_type(client):
    y = np.random.default_rng(1).normal(size=200).round(3)
    body = _refused(client, _frame(y))
    n_distinct = len(np.unique(y))
    assert type_of_target(y) == "continuous"
    assert "'score' is continuous" in body["detail"]
    assert f"type_of_target 'continuous', {n_distinct} distinct values in 200 rows" in body[
        "detail"]
    assert "label option" in body["detail"]


def test_too_many_classes_for_the_rows_is_refused(client):
    n = 100
    y = np.arange(n) % (int(MAX_CLASS_SHARE * n) + 1)  # 21 classes of ~5 rows in 100 rows
    body = _refused(client, _frame(y))
    assert "too many classes" in body["detail"]
    assert f"{len(np.unique(y))} distinct values in {n} rows" in body["detail"]


def test_class_with_a_single_row_is_refused(client):
    y = np.array([0, 1] * 20 + [2])
    body = _refused(client, _frame(y))
    assert "1 classes with a single row (2;" in body["detail"]


def test_a_label_that_is_a_class_is_accepted(client):
    y = np.arange(100) % 20  # 20 classes of 5 rows: exactly the share allowed
    assert len(np.unique(y)) <= MAX_CLASS_SHARE * 100
    ds = upload(client, _frame(y))
    assert len(ds["classes"]) == 20
    # and the default label (the last column) of a scores file is checked the same way
    y = np.random.default_rng(2).integers(0, 101, size=300)
    body = _refused(client, _frame(y))
    assert "'score'" in body["detail"]


def _count_jobs(engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(Job))


def test_test_fraction_leaving_a_class_one_training_row_is_refused_before_queueing(
    client, engine
):
    X, y = blobs(n=40)
    ds = upload(client, to_csv(X, y))
    r = client.post("/train", json={"dataset_id": ds["id"], "test_fraction": 0.95})
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["field"] == "test_fraction"
    assert "test_fraction 0.95 leaves 1 training rows of class" in error["message"]
    assert _count_jobs(engine) == 0
    r = client.post("/train", json={"dataset_id": ds["id"], "test_fraction": 0.5})
    assert r.status_code == 202, r.text


def test_search_needs_as_many_training_rows_per_class_as_folds(client, engine):
    X, y = blobs(n=24)  # 12 per class; a 0.5 hold-out leaves 6 of each
    ds = upload(client, to_csv(X, y))
    search = {"grid": {"alpha": [1, 16]}, "cv": 8}
    r = client.post("/train", json={"dataset_id": ds["id"], "test_fraction": 0.5,
                                    "search": search})
    assert r.status_code == 422, r.text
    message = r.json()["errors"][0]["message"]
    assert "leaves 6 training rows" in message and "8-fold search needs 8 rows" in message
    assert _count_jobs(engine) == 0
    search["cv"] = 6
    r = client.post("/train", json={"dataset_id": ds["id"], "test_fraction": 0.5,
                                    "search": search})
    assert r.status_code == 202, r.text
