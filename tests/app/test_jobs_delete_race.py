"""Defect 4 (issue 8): DELETE /datasets/{id} and POST /train (or /experiments) on the same
dataset, at the same time, are exclusive: either the job is queued and the delete answers 409,
or the dataset is deleted and the submission answers 404 naming dataset_id — never a queued
job whose dataset is gone. Both take the dataset's row lock (SELECT … FOR UPDATE)."""

from __future__ import annotations

import threading

from sqlalchemy import select

from app.jobs.orm import Job
from tests.app.support import assert_problem, blobs, to_csv, upload

TRIALS = 30


def _race(client, post: tuple[str, dict], dataset_id: int) -> tuple:
    barrier = threading.Barrier(2)
    out: dict[str, object] = {}

    def delete() -> None:
        barrier.wait()
        out["delete"] = client.delete(f"/datasets/{dataset_id}")

    def submit() -> None:
        barrier.wait()
        out["post"] = client.post(post[0], json=post[1])

    threads = [threading.Thread(target=delete), threading.Thread(target=submit)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out["delete"], out["post"]


def _check_trials(client, engine, make_post, field: str) -> dict[str, int]:
    csv = to_csv(*blobs(n=20))
    seen = {"job first": 0, "delete first": 0}
    for _ in range(TRIALS):
        ds = upload(client, csv)
        deleted, posted = _race(client, make_post(ds["id"]), ds["id"])
        if posted.status_code == 202:
            assert_problem(deleted, 409)
            assert client.get(f"/datasets/{ds['id']}").status_code == 200
            client.post(f"/jobs/{posted.json()['id']}/cancel")
            seen["job first"] += 1
        else:
            assert deleted.status_code == 204, deleted.text
            assert_problem(posted, 404, field)
            seen["delete first"] += 1
    with engine.connect() as conn:
        orphans = conn.scalars(select(Job.id).where(Job.dataset_id.is_(None))).all()
    assert orphans == []
    return seen


def test_delete_and_train_on_one_dataset_are_exclusive(client, engine):
    seen = _check_trials(client, engine, lambda i: ("/train", {"dataset_id": i}), "dataset_id")
    assert sum(seen.values()) == TRIALS


def test_delete_and_experiment_on_one_dataset_are_exclusive(client, engine):
    seen = _check_trials(
        client,
        engine,
        lambda i: ("/experiments", {"dataset_ids": [i], "splits": 2, "cv": 2}),
        "dataset_ids[0]",
    )
    assert sum(seen.values()) == TRIALS
