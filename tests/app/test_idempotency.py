"""Idempotency-Key on POST /datasets, /train and /experiments (issue 8 item 12)."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from app.core.db import is_sqlite
from app.core.orm import IdempotencyKey
from app.datasets.orm import Dataset
from app.jobs.orm import Job
from tests.app.support import assert_problem, blobs, sqlite_write_lock, to_csv, upload

KEY = {"Idempotency-Key": "3f1c2a9e-8d4b-4e0f-9a51-2b7c6d8e9f10"}


def count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(table))


def assert_replayed(first, again) -> None:
    assert again.status_code == first.status_code
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers


def test_train_with_the_same_key_and_body_is_replayed(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    body = {"dataset_id": ds["id"], "alpha": 2}
    first = client.post("/train", json=body, headers=KEY)
    assert first.status_code == 202, first.text
    again = client.post("/train", json=dict(reversed(body.items())), headers=KEY)
    assert_replayed(first, again)
    assert count(engine, Job) == 1
    # without a key, every POST creates a job
    client.post("/train", json=body)
    client.post("/train", json=body)
    assert count(engine, Job) == 3


def test_same_key_with_another_body_is_refused(client, engine):
    """A 409 (issue 45: a 422 told schemathesis, and any client, the request itself was
    invalid; it is valid, the key is bound to another one)."""
    ds = upload(client, to_csv(*blobs(n=20)))
    assert client.post("/train", json={"dataset_id": ds["id"]}, headers=KEY).status_code == 202
    r = client.post("/train", json={"dataset_id": ds["id"], "alpha": 4}, headers=KEY)
    problem = assert_problem(r, 409, "Idempotency-Key")
    assert "POST /train" in problem["detail"]
    # nor may the key be reused on another operation
    r = client.post("/experiments", json={"dataset_ids": [ds["id"]]}, headers=KEY)
    assert_problem(r, 409, "Idempotency-Key")
    assert count(engine, Job) == 1


def test_dataset_upload_is_replayed_for_the_same_file_and_options(client, engine):
    csv = to_csv(*blobs(n=20))
    files = {"file": ("a.csv", csv)}
    first = client.post("/datasets", files=files, data={"name": "a"}, headers=KEY)
    assert first.status_code == 201, first.text
    # a new multipart boundary, same content: the same request
    again = client.post("/datasets", files=files, data={"name": "a"}, headers=KEY)
    assert_replayed(first, again)
    assert first.headers["location"] == f"/datasets/{first.json()['id']}"
    assert count(engine, Dataset) == 1
    other = to_csv(*blobs(n=20, seed=1))
    r = client.post("/datasets", files={"file": ("a.csv", other)}, data={"name": "a"}, headers=KEY)
    assert_problem(r, 409, "Idempotency-Key")
    r = client.post("/datasets", files=files, data={"name": "b"}, headers=KEY)
    assert_problem(r, 409, "Idempotency-Key")
    assert count(engine, Dataset) == 1


def test_experiment_is_replayed(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    body = {"dataset_ids": [ds["id"]], "splits": 2, "cv": 2}
    first = client.post("/experiments", json=body, headers=KEY)
    assert first.status_code == 202, first.text
    assert_replayed(first, client.post("/experiments", json=body, headers=KEY))
    assert count(engine, Job) == 1


def test_a_failed_request_stores_nothing_and_may_be_retried(client, engine):
    r = client.post("/train", json={"dataset_id": 999}, headers=KEY)
    assert_problem(r, 404, "dataset_id")
    assert count(engine, IdempotencyKey) == 0
    ds = upload(client, to_csv(*blobs(n=20)))
    assert client.post("/train", json={"dataset_id": ds["id"]}, headers=KEY).status_code == 202
    assert count(engine, IdempotencyKey) == 1


def test_replay_does_not_wait_for_the_write_lock(client, engine, settings):
    """SQLite: another process holds the write lock; a retry whose response is stored is
    replayed at once (the key's lookup is a read-only transaction). Before, the lookup began
    with BEGIN IMMEDIATE and waited for the writer."""
    if not is_sqlite(settings.database_url):
        pytest.skip("SQLite's write lock")
    ds = upload(client, to_csv(*blobs(n=20)))
    body = {"dataset_id": ds["id"]}
    first = client.post("/train", json=body, headers=KEY)
    assert first.status_code == 202, first.text
    hold = 6.0
    with sqlite_write_lock(settings.database_url, hold):
        t0 = time.monotonic()
        again = client.post("/train", json=body, headers=KEY)
        assert time.monotonic() - t0 < hold / 2
    assert_replayed(first, again)
    assert count(engine, Job) == 1


def test_key_is_validated(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    r = client.post("/train", json={"dataset_id": ds["id"]}, headers={"Idempotency-Key": "k" * 256})
    assert_problem(r, 422, "Idempotency-Key")


def _concurrently(n: int, call) -> list:
    barrier = threading.Barrier(n)
    out: list = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        out[i] = call()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return out


def test_concurrent_requests_with_one_key_create_one_row(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    for trial in range(5):
        key = {"Idempotency-Key": f"train-{trial}"}
        answers = _concurrently(
            4, lambda key=key: client.post("/train", json={"dataset_id": ds["id"]}, headers=key)
        )
        assert {r.status_code for r in answers} == {202}, [r.text for r in answers]
        assert len({r.headers["location"] for r in answers}) == 1
        assert len({r.text for r in answers}) == 1
    assert count(engine, Job) == 5
    csv = to_csv(*blobs(n=30))
    answers = _concurrently(
        4,
        lambda: client.post(
            "/datasets", files={"file": ("c.csv", csv)}, headers={"Idempotency-Key": "upload"}
        ),
    )
    assert {r.status_code for r in answers} == {201}, [r.text for r in answers]
    assert len({r.headers["location"] for r in answers}) == 1
    assert count(engine, Dataset) == 2  # the one uploaded first, and this one


def test_openapi_documents_the_header(client):
    spec = client.get("/openapi.json").json()
    for path in ("/datasets", "/train", "/experiments"):
        params = spec["paths"][path]["post"].get("parameters", [])
        header = [p for p in params if p["name"] == "Idempotency-Key"]
        assert header and header[0]["in"] == "header" and not header[0].get("required")
        assert "same key" in header[0]["description"]
        created = spec["paths"][path]["post"]["responses"]["201" if path == "/datasets" else "202"]
        assert {"Location", "Idempotent-Replayed"} <= set(created["headers"])
