"""Health, readiness, metrics, request ids and the OpenAPI document."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.config import Settings
from app.core.db import make_engine
from app.main import create_app
from tests.app.support import assert_problem, blobs, to_csv, upload

# the export's files (app.export.routes)
BINARY_MEDIA_TYPES = {"application/zip", "application/octet-stream",
                      "application/vnd.apache.parquet"}


def test_livez(client):
    r = client.get("/livez")
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_readyz_ok_when_migrated(client):
    r = client.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json()["database"] == "ok" and r.json()["migrations"]


def test_readyz_503_on_an_unmigrated_database(tmp_path):
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}", _env_file=None))
    with TestClient(app) as client:
        body = assert_problem(client.get("/readyz"), 503)
    assert "msvmav migrate" in body["detail"]


def test_readyz_503_when_behind_head(database_url, engine):
    app = create_app(Settings(database_url=database_url, _env_file=None))
    with engine.begin() as conn:
        head = conn.scalar(text("SELECT version_num FROM alembic_version"))
        conn.execute(text("UPDATE alembic_version SET version_num = 'old'"))
    try:
        with TestClient(app) as client:
            assert_problem(client.get("/readyz"), 503)
    finally:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :h"), {"h": head})


def test_readyz_503_when_database_unreachable():
    app = create_app(
        Settings(
            database_url="postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1",
            _env_file=None,
        )
    )
    with TestClient(app) as client:
        body = assert_problem(client.get("/readyz"), 503)
        assert client.get("/livez").status_code == 200
    assert "unreachable" in body["detail"]


def test_request_id_is_echoed_or_generated(client):
    r = client.get("/livez", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    generated = client.get("/livez").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    # A header that could forge log lines is replaced.
    assert client.get("/livez", headers={"X-Request-ID": "a b\tc"}).headers["x-request-id"] != (
        "a b\tc"
    )


def test_request_id_appears_in_logs(client, caplog):
    from app.core.logs import RequestIdFilter

    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level("INFO", logger="app.access"):
        client.get("/livez", headers={"X-Request-ID": "trace-me"})
    records = [r for r in caplog.records if r.name == "app.access"]
    assert [r.request_id for r in records] == ["trace-me"]
    assert "route=/livez" in records[0].getMessage()
    assert "status=200" in records[0].getMessage()


def test_metrics_count_requests_by_route_and_jobs_by_status(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    client.get(f"/datasets/{ds['id']}")
    client.get("/datasets/987654")
    client.post("/train", json={"dataset_id": ds["id"]})
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text_ = r.text
    assert (
        'msvmav_http_requests_total{method="GET",route="/datasets/{dataset_id}",status="200"} 1'
        in text_
    )
    assert (
        'msvmav_http_requests_total{method="GET",route="/datasets/{dataset_id}",status="404"} 1'
        in text_
    )
    assert 'msvmav_http_requests_total{method="POST",route="/datasets",status="201"} 1' in text_
    assert 'msvmav_jobs{status="queued"} 1' in text_
    assert 'msvmav_jobs{status="running"} 0' in text_
    assert "# TYPE msvmav_http_requests_total counter" in text_


def test_swagger_ui_is_served(client):
    r = client.get("/docs")
    assert r.status_code == 200 and "swagger" in r.text.lower()


def test_openapi_has_stable_operation_ids_tags_and_examples(client):
    spec = client.get("/openapi.json").json()
    ops = {
        (path, method): op for path, item in spec["paths"].items() for method, op in item.items()
    }
    ids = {op["operationId"] for op in ops.values()}
    assert {
        "create_dataset",
        "list_datasets",
        "get_dataset",
        "delete_dataset",
        "create_train_job",
        "list_jobs",
        "get_job",
        "cancel_job",
        "list_models",
        "get_model",
        "delete_model",
        "get_model_margins",
        "predict",
        "predict_file",
        "livez",
        "readyz",
        "metrics",
    } <= ids
    schemas = spec["components"]["schemas"]

    def has_example(schema: dict) -> bool:
        if "$ref" in schema:
            schema = schemas[schema["$ref"].split("/")[-1]]
        return bool(schema.get("examples") or schema.get("example"))

    for (path, method), op in ops.items():
        assert op.get("tags"), (path, method)
        assert op.get("summary"), (path, method)
        for code, response in op["responses"].items():
            if int(code) >= 400:
                assert "application/problem+json" in response["content"], (path, method, code)
                continue
            for media_type, media in response.get("content", {}).items():
                # binary (a figure, an exported model file): a schema, no textual example
                if media_type.startswith("image/") or media_type in BINARY_MEDIA_TYPES:
                    assert media["schema"] == {"type": "string", "format": "binary"}
                    continue
                assert has_example(media.get("schema", {})) or media.get("example"), (
                    path,
                    method,
                    code,
                )
        body = op.get("requestBody")
        if body:
            for media in body["content"].values():
                assert (
                    media.get("examples")
                    or media.get("example")
                    or has_example(media["schema"])
                    or any(
                        p.get("examples")
                        for p in schemas.get(media["schema"].get("$ref", "/").split("/")[-1], {})
                        .get("properties", {})
                        .values()
                    )
                ), (path, method)
    assert "HTTPValidationError" not in schemas


def test_sqlite_pragmas(settings):
    if not settings.database_url.startswith("sqlite"):
        return
    engine = make_engine(settings.database_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    engine.dispose()
