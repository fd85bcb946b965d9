"""Every 4xx/5xx is RFC 9457 problem+json naming the field, row or column at fault, and a
failed request leaves nothing behind."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.core.config import Settings
from app.datasets.orm import Dataset, DatasetArray
from app.jobs.orm import Job
from app.main import create_app
from tests.app.support import assert_problem, blobs, submit, to_csv, trained_model, upload


def _count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(table))


# --- unknown ids and routes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/datasets/999999"),
        ("delete", "/datasets/999999"),
        ("get", "/jobs/999999"),
        ("post", "/jobs/999999/cancel"),
        ("get", "/models/999999"),
        ("delete", "/models/999999"),
        ("get", "/models/999999/margins"),
    ],
)
def test_unknown_ids_are_404_problems(client, method, path):
    body = assert_problem(getattr(client, method)(path), 404)
    assert "999999" in body["detail"]
    assert body["instance"] == path


def test_unknown_route_and_method_are_problems(client):
    assert_problem(client.get("/nowhere"), 404)
    assert_problem(client.put("/datasets"), 405)


def test_non_integer_path_id_is_422_naming_it(client):
    assert_problem(client.get("/datasets/abc"), 422, field="dataset_id")


def test_bad_cursor_and_limit_are_422(client):
    assert_problem(client.get("/datasets", params={"cursor": "???"}), 422, field="cursor")
    assert_problem(client.get("/jobs", params={"limit": 0}), 422, field="limit")
    assert_problem(client.get("/jobs", params={"status": "sleeping"}), 422, field="status")


# --- uploads ------------------------------------------------------------------------------------


def test_upload_without_file_is_422(client):
    assert_problem(client.post("/datasets", data={"name": "x"}), 422, field="file")


def test_empty_file_is_422_and_nothing_stored(client, engine):
    assert_problem(client.post("/datasets", files={"file": ("e.csv", b"")}), 422, field="file")
    assert _count(engine, Dataset) == 0


def test_unknown_label_column_names_the_label_option(client, engine):
    r = client.post(
        "/datasets", files={"file": ("d.csv", to_csv(*blobs(n=10)))}, data={"label": "nope"}
    )
    body = assert_problem(r, 422, field="label")
    assert body["field"] == "label"
    assert "nope" in body["detail"]
    assert _count(engine, Dataset) == 0 and _count(engine, DatasetArray) == 0


def test_missing_value_error_names_row_and_column(client, engine):
    content = b"a,b,y\n1,2,x\n3,?,y\n5,6,x\n"
    body = assert_problem(client.post("/datasets", files={"file": ("d.csv", content)}), 422)
    assert body["row"] == 3 and body["column"] == "b"
    assert body["errors"][0]["row"] == 3 and body["errors"][0]["column"] == "b"
    assert _count(engine, Dataset) == 0


def test_bad_missing_option_is_422(client):
    r = client.post(
        "/datasets", files={"file": ("d.csv", to_csv(*blobs(n=10)))}, data={"missing": "maybe"}
    )
    assert_problem(r, 422, field="missing")


def test_upload_over_the_size_limit_is_413_and_nothing_stored(database_url, engine):
    from fastapi.testclient import TestClient

    app = create_app(Settings(database_url=database_url, max_upload_bytes=1000, _env_file=None))
    with TestClient(app) as client:
        big = to_csv(*blobs(n=200))
        assert len(big) > 1000
        r = client.post("/datasets", files={"file": ("big.csv", big)})
        body = assert_problem(r, 413)
        assert "1000" in body["detail"]
        small = to_csv(*blobs(n=4))
        assert len(small) < 1000
        assert client.post("/datasets", files={"file": ("s.csv", small)}).status_code == 201
    assert _count(engine, Dataset) == 1


def test_streamed_body_over_the_limit_is_413(database_url, engine):
    """No Content-Length (chunked upload): the limit is enforced while reading."""
    from fastapi.testclient import TestClient

    app = create_app(Settings(database_url=database_url, max_json_bytes=10_000, _env_file=None))

    def chunks():
        for _ in range(3000):
            yield b"1.0,2.0,x\n" * 100

    with TestClient(app) as client:
        r = client.post("/predict", content=chunks(), headers={"content-type": "application/json"})
        assert_problem(r, 413)
    assert _count(engine, Dataset) == 0


def test_declared_content_length_over_the_limit_is_413_before_reading(database_url, engine):
    from fastapi.testclient import TestClient

    app = create_app(Settings(database_url=database_url, max_upload_bytes=10, _env_file=None))
    with TestClient(app) as client:
        big = b"a,y\n" + b"1.0,x\n" * 300_000  # > limit + multipart slack
        r = client.post("/datasets", files={"file": ("big.csv", big)})
        assert "MSVMAV_MAX_UPLOAD_BYTES" in assert_problem(r, 413)["detail"]
    assert _count(engine, Dataset) == 0


def test_too_many_rows_is_413(database_url, engine):
    from fastapi.testclient import TestClient

    app = create_app(Settings(database_url=database_url, max_rows=10, _env_file=None))
    with TestClient(app) as client:
        r = client.post("/datasets", files={"file": ("d.csv", to_csv(*blobs(n=11)))})
        assert "MSVMAV_MAX_ROWS" in assert_problem(r, 413)["detail"]
    assert _count(engine, Dataset) == 0


# --- training -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params,field",
    [
        ({"alpha": 0}, "alpha"),
        ({"alpha": -1}, "alpha"),
        ({"beta": 0}, "beta"),
        ({"gamma": -0.5}, "gamma"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1}, "tol"),
        ({"kernel": "sigmoid"}, "kernel"),
        ({"scaling": "zscore"}, "scaling"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"test_fraction": 0}, "test_fraction"),
        ({"approximation": "magic"}, "approximation"),
        ({"n_components": 0}, "n_components"),
        ({"alpah": 1}, "alpah"),
    ],
)
def test_invalid_hyper_parameters_are_422_naming_the_field(client, engine, params, field):
    ds = upload(client, to_csv(*blobs(n=20)))
    r = client.post("/train", json={"dataset_id": ds["id"], **params})
    assert_problem(r, 422, field=field)
    assert _count(engine, Job) == 0


def test_nan_hyper_parameter_is_422(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    r = client.post(
        "/train",
        content=f'{{"dataset_id": {ds["id"]}, "alpha": NaN}}',
        headers={"content-type": "application/json"},
    )
    assert_problem(r, 422, field="alpha")


def test_train_on_unknown_dataset_is_404_naming_it(client):
    assert_problem(client.post("/train", json={"dataset_id": 424242}), 404, field="dataset_id")


def test_single_class_dataset_is_refused_at_upload(client, engine):
    # (issue 10: refused when uploaded, so no dataset exists that /train would refuse)
    content = b"a,b,y\n1,2,only\n3,4,only\n5,6,only\n"
    r = client.post("/datasets", files={"file": ("data.csv", content)})
    body = assert_problem(r, 422, "label")
    assert "single class" in body["detail"] and "'y'" in body["detail"]
    assert _count(engine, Dataset) == 0 and _count(engine, Job) == 0


def test_test_fraction_leaving_too_few_rows_is_422(client):
    ds = upload(client, b"a,y\n1,x\n2,y\n3,x\n4,y\n")  # (a class needs 2 rows)
    r = client.post("/train", json={"dataset_id": ds["id"], "test_fraction": 0.9})
    assert_problem(r, 422, field="test_fraction")


def test_malformed_json_is_422(client):
    r = client.post("/train", content=b"{not json", headers={"content-type": "application/json"})
    body = assert_problem(r, 422, field="body")
    assert "JSON" in body["detail"]


# --- prediction ---------------------------------------------------------------------------------


@pytest.fixture
def model(client, worker):
    return trained_model(client, worker)


def test_predict_unknown_model_is_404_naming_it(client):
    r = client.post("/predict", json={"model_id": 999999, "instances": [[1, 2, 3]]})
    assert_problem(r, 404, field="model_id")


def test_predict_wrong_feature_count_names_the_row(client, model):
    r = client.post("/predict", json={"model_id": model["id"], "instances": [[1, 2, 3], [1, 2]]})
    body = assert_problem(r, 422, field="instances[1]")
    assert body["row"] == 1


def test_predict_non_numeric_value_names_row_and_column(client, model):
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": [[1, 2, 3], [1, "abc", 3]]}
    )
    body = assert_problem(r, 422, field="instances[1]")
    assert body["row"] == 1 and body["column"] == "x1"


def test_predict_nan_and_null_are_422(client, model):
    r = client.post(
        "/predict",
        content=f'{{"model_id": {model["id"]}, "instances": [[1, NaN, 3]]}}',
        headers={"content-type": "application/json"},
    )
    assert_problem(r, 422, field="instances[0]")
    r = client.post("/predict", json={"model_id": model["id"], "instances": [[1, None, 3]]})
    assert_problem(r, 422, field="instances[0]")


def test_predict_missing_record_key_names_the_column(client, model):
    r = client.post("/predict", json={"model_id": model["id"], "instances": [{"x0": 1, "x1": 2}]})
    body = assert_problem(r, 422, field="instances[0]")
    assert body["column"] == "x2"


def test_predict_empty_instances_is_422(client, model):
    assert_problem(
        client.post("/predict", json={"model_id": model["id"], "instances": []}), 422, "instances"
    )


def test_predict_unknown_label_and_wrong_label_count_are_422(client, model):
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": [[1, 2, 3]], "labels": ["cat"]}
    )
    assert_problem(r, 422, field="labels[0]")
    r = client.post(
        "/predict",
        json={"model_id": model["id"], "instances": [[1, 2, 3]], "labels": ["neg", "pos"]},
    )
    assert_problem(r, 422, field="labels")


def test_predict_too_many_instances_is_413(database_url, engine, worker):
    from fastapi.testclient import TestClient

    app = create_app(Settings(database_url=database_url, max_predict_instances=2, _env_file=None))
    with TestClient(app) as client:
        m = trained_model(client, worker)
        r = client.post("/predict", json={"model_id": m["id"], "instances": [[1, 2, 3]] * 3})
        assert "MSVMAV_MAX_PREDICT_INSTANCES" in assert_problem(r, 413)["detail"]


def test_predict_file_errors_name_row_and_column(client, model):
    content = b"x0,x1,x2\n1,2,3\n4,oops,6\n"
    r = client.post(
        "/predict/file", files={"file": ("b.csv", content)}, data={"model_id": model["id"]}
    )
    body = assert_problem(r, 422)
    assert body["row"] == 3 and body["column"] == "x1"
    r = client.post("/predict/file", files={"file": ("b.csv", b"")}, data={"model_id": model["id"]})
    assert_problem(r, 422, field="file")
    r = client.post(
        "/predict/file", files={"file": ("b.csv", content)}, data={"model_id": "999999"}
    )
    assert_problem(r, 404, field="model_id")


# --- server errors ------------------------------------------------------------------------------


def test_unhandled_exception_is_a_500_problem_with_request_id(app, monkeypatch):
    from fastapi.testclient import TestClient

    from app.datasets import service

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(service, "list_page", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/datasets", headers={"X-Request-ID": "req-123"})
    body = assert_problem(r, 500)
    assert "secret" not in body["detail"]
    assert body["request_id"] == "req-123"
    assert r.headers["x-request-id"] == "req-123"


def test_failed_training_submission_leaves_no_job(client, engine):
    ds = upload(client, to_csv(*blobs(n=20)))
    client.post("/train", json={"dataset_id": ds["id"], "alpha": -1})
    submit(client, ds["id"])
    assert _count(engine, Job) == 1
