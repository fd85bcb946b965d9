"""POST/GET/DELETE /datasets on every backend."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import func, select

from app.datasets import service as datasets_service
from app.datasets.orm import Dataset, DatasetArray
from tests.app.support import SHARED_DATASETS, blobs, submit, to_csv, upload


def test_upload_csv_stores_metadata_and_arrays(client, engine, app):
    X, y = blobs(n=40, d=3)
    r = client.post(
        "/datasets", files={"file": ("blobs.csv", to_csv(X, y))}, data={"name": "my blobs"}
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert r.headers["location"] == f"/datasets/{body['id']}"
    assert body["name"] == "my blobs"
    assert body["filename"] == "blobs.csv"
    assert (body["n_rows"], body["n_features"]) == (40, 3)
    assert body["feature_names"] == ["x0", "x1", "x2"]
    assert body["classes"] == ["neg", "pos"]
    assert body["class_counts"] == [20, 20]
    assert len(body["sha256"]) == 64
    assert body["encoding"]["label"] == "y"

    with app.state.session_factory() as session:
        ds = session.get(Dataset, body["id"])
        X_stored, y_stored = datasets_service.load_arrays(session, ds)
    np.testing.assert_allclose(X_stored, np.round(X, 6))
    assert y_stored.tolist() == list(y)


def test_get_dataset_returns_the_upload(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    r = client.get(f"/datasets/{ds['id']}")
    assert r.status_code == 200
    assert r.json() == ds


def test_list_datasets_pages_with_cursor_newest_first(client):
    ids = [upload(client, to_csv(*blobs(n=10, seed=i)), name=f"d{i}")["id"] for i in range(5)]
    seen = []
    r = client.get("/datasets", params={"limit": 2})
    pages = 0
    while True:
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["items"]) <= 2
        assert "feature_names" not in page["items"][0]
        seen += [item["id"] for item in page["items"]]
        pages += 1
        if page["next_cursor"] is None:
            break
        r = client.get("/datasets", params={"limit": 2, "cursor": page["next_cursor"]})
    assert seen == sorted(ids, reverse=True)
    assert pages == 3


def test_upload_options_label_drop_missing(client):
    # (each class keeps 2 rows after the drop: a class needs 2)
    content = (b"id,a,b,target\n1,1.0,2.0,x\n2,?,1.0,y\n3,0.5,0.1,y\n4,2.0,3.0,x\n"
               b"5,0.7,0.2,y\n")
    ds = upload(client, content, label="target", drop="id", missing="drop")
    assert (ds["n_rows"], ds["n_features"], ds["n_rows_dropped"]) == (4, 2, 1)
    assert ds["feature_names"] == ["a", "b"]
    assert ds["options"] == {"label": "target", "drop": ["id"], "missing": "drop"}


def test_drop_accepts_repeated_fields(client):
    content = b"id,junk,a,b,target\n1,q,1.0,2.0,x\n2,r,0.0,1.0,y\n3,s,1.0,1.0,x\n4,t,0.0,2.0,y\n"
    r = client.post(
        "/datasets",
        files={"file": ("d.csv", content)},
        data={"label": "target", "drop": ["id", "junk"]},
    )
    assert r.status_code == 201, r.text
    assert r.json()["feature_names"] == ["a", "b"]


def test_delete_dataset_removes_row_and_blobs(client, app):
    ds = upload(client, to_csv(*blobs(n=20)))
    assert client.delete(f"/datasets/{ds['id']}").status_code == 204
    assert client.get(f"/datasets/{ds['id']}").status_code == 404
    with app.state.session_factory() as session:
        n = session.scalar(
            select(func.count())
            .select_from(DatasetArray)
            .where(DatasetArray.dataset_id == ds["id"])
        )
    assert n == 0


def test_delete_dataset_conflicts_while_a_job_is_queued(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    job = submit(client, ds["id"])
    r = client.delete(f"/datasets/{ds['id']}")
    assert r.status_code == 409
    assert r.headers["content-type"].startswith("application/problem+json")
    assert str(ds["id"]) in r.json()["detail"]
    assert client.post(f"/jobs/{job['id']}/cancel").status_code == 200
    assert client.delete(f"/datasets/{ds['id']}").status_code == 204
    # The finished job outlives the dataset.
    assert client.get(f"/jobs/{job['id']}").json()["dataset_id"] is None


SHARED_CASES = [
    ("wdbc.arff", {"label": "Class"}, 569, 30),
    ("titanic.tsv", {"label": "target"}, 2201, 3),
    ("german.numer_scale.txt", {}, 1000, 24),
    ("breast-w.arff", {"label": "Class", "missing": "drop"}, 683, 9),
    ("keel_wisconsin.dat", {"header": "false", "format": "csv"}, 683, 9),
]


@pytest.mark.parametrize(("filename", "form", "rows", "features"), SHARED_CASES)
def test_shared_datasets_upload_with_readme_options(client, filename, form, rows, features):
    path = SHARED_DATASETS / filename
    if not path.exists():
        pytest.skip(f"{path} not available")
    ds = upload(client, path.read_bytes(), filename=filename, **form)
    assert (ds["n_rows"], ds["n_features"]) == (rows, features)
    assert len(ds["classes"]) == 2
    assert sum(ds["class_counts"]) == rows
