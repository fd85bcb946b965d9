"""Regression tests of issue 8's defects 3, 5, 6, 7, 8 and 9: the JSON body limit, ids out of
the database's range, long names, spreadsheet/Markdown injection in the experiment tables,
strict request types and bounds, degenerate fits, and HTTP conformance (400/405/413)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from app.core.config import Settings
from app.core.ids import MAX_DB_ID
from app.datasets.orm import Dataset
from app.experiments.table_cells import csv_cell, markdown_cell
from app.jobs.orm import Job
from app.jobs.worker import _error_text
from app.main import create_app
from app.tables import Base
from tests.app.support import (
    assert_problem,
    blobs,
    run_jobs,
    submit,
    to_csv,
    trained_model,
    upload,
)

BIG_IDS = [str(2**31), str(2**63), "9" * 40]


def _row_counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in Base.metadata.sorted_tables
        }


# -- defect 3: JSON bodies have their own limit ----------------------------------------------
def _small_json_app(database_url: str, **settings):
    from fastapi.testclient import TestClient

    app = create_app(
        Settings(database_url=database_url, max_json_bytes=1000, _env_file=None, **settings)
    )
    return TestClient(app)


def test_json_body_over_max_json_bytes_is_413_at_once(database_url, engine):
    with _small_json_app(database_url) as client:
        body = b'{"model_id": 1, "instances": [' + b"[1.0, 2.0]," * 200 + b"[1.0, 2.0]]}"
        r = client.post("/predict", content=body, headers={"content-type": "application/json"})
        problem = assert_problem(r, 413)
    assert "MSVMAV_MAX_JSON_BYTES" in problem["detail"] and "1000" in problem["detail"]
    assert problem["title"] == "Content Too Large"
    assert problem["type"] == "urn:msvmav:problem:too-large"


def test_streamed_json_body_is_cut_at_max_json_bytes(database_url, engine):
    """No Content-Length: the stream is counted and refused once it crosses the limit."""
    def chunks():
        for _ in range(10_000):
            yield b"[1.0, 2.0, 3.0]," * 10

    with _small_json_app(database_url) as client:
        r = client.post("/train", content=chunks(), headers={"content-type": "application/json"})
        assert "MSVMAV_MAX_JSON_BYTES" in assert_problem(r, 413)["detail"]
    assert _row_counts(engine)["jobs"] == 0


def test_uploads_keep_the_upload_limit_above_the_json_limit(database_url, engine):
    """A multipart upload larger than max_json_bytes is fine (only JSON bodies are capped)."""
    with _small_json_app(database_url) as client:
        content = to_csv(*blobs(n=80))
        assert len(content) > 1000
        ds = upload(client, content)
    assert ds["n_rows"] == 80


def test_every_413_has_the_same_title(database_url, engine, worker):
    """The middleware's cap, the service's row cap and the predict batch cap."""
    from fastapi.testclient import TestClient

    settings = Settings(
        database_url=database_url,
        max_json_bytes=400,
        max_rows=5,
        max_predict_instances=1,
        _env_file=None,
    )
    with TestClient(create_app(settings)) as client:
        titles = set()
        r = client.post("/train", json={"dataset_id": 1, "params": {"x" * 500: 1}})
        titles.add(assert_problem(r, 413)["title"])
        r = client.post("/datasets", files={"file": ("d.csv", to_csv(*blobs(n=20)))})
        titles.add(assert_problem(r, 413)["title"])
        r = client.post("/predict", json={"model_id": 1, "instances": [[1, 2, 3], [1, 2, 3]]})
        titles.add(assert_problem(r, 413)["title"])
    assert titles == {"Content Too Large"}


# -- defect 5: ids out of the database's range -------------------------------------------------
def _id_routes(app) -> list[tuple[str, str]]:
    """(method, path template) of every operation with an id in its path."""
    out = []
    for path, item in app.openapi()["paths"].items():
        if re.search(r"\{\w+_id\}", path):
            out += [(method.upper(), path) for method in item]
    return out


@pytest.mark.parametrize("big", BIG_IDS)
def test_path_ids_out_of_range_are_404_on_every_route(client, app, engine, big):
    routes = _id_routes(app)
    assert len(routes) >= 10
    before = _row_counts(engine)
    for method, template in routes:
        path = re.sub(r"\{\w+_id\}", big, template)
        r = client.request(method, path)
        body = assert_problem(r, 404)
        assert big in body["detail"], (method, path, body)
    assert _row_counts(engine) == before


def test_path_id_at_the_top_of_the_range_is_a_plain_404(client):
    assert_problem(client.get(f"/jobs/{MAX_DB_ID}"), 404)
    assert_problem(client.get("/models/0"), 404)


@pytest.mark.parametrize("big", [2**31, 2**63, 10**40])
def test_body_ids_out_of_range_are_422_naming_the_field(client, engine, big):
    assert_problem(client.post("/train", json={"dataset_id": big}), 422, "dataset_id")
    assert_problem(
        client.post("/experiments", json={"dataset_ids": [big]}), 422, "dataset_ids[0]"
    )
    r = client.post("/predict", json={"model_id": big, "instances": [[1.0]]})
    assert_problem(r, 422, "model_id")
    r = client.post("/predict/file", files={"file": ("x.csv", b"a\n1\n")}, data={"model_id": big})
    assert_problem(r, 422, "model_id")
    assert _row_counts(engine)["jobs"] == 0


@pytest.mark.parametrize("big", BIG_IDS)
def test_query_ids_out_of_range_are_422_naming_the_field(client, worker, big):
    model = trained_model(client, worker)
    for path in (f"/models/{model['id']}/margins", f"/models/{model['id']}/margins.png"):
        assert_problem(client.get(path, params={"dataset_id": big}), 422, "dataset_id")


def test_a_cursor_past_every_id_is_the_first_page_and_other_text_is_422(client):
    """A cursor is decimal digits (the OpenAPI document's pattern): one past the ids a row can
    have (2^31 and up, to 18 digits) starts below every id, the first page, never a database
    error; longer, signed or other text is a 422 naming it (issue 45: the document stated no
    form, so text it allowed was refused)."""
    upload(client, to_csv(*blobs(n=20)))
    first = client.get("/datasets").json()["items"]
    for value in (2**31, 2**40, 10**17):
        r = client.get("/datasets", params={"cursor": str(value)})
        assert r.status_code == 200 and r.json()["items"] == first, r.text
    assert client.get("/datasets", params={"cursor": "0"}).json()["items"] == []
    for bad in (str(10**18), "-1", "1.5", " 1", "aWQ6MQ", "1\n"):
        assert_problem(client.get("/datasets", params={"cursor": bad}), 422, "cursor")
    schema = client.get("/openapi.json").json()["paths"]["/datasets"]["get"]["parameters"]
    (cursor,) = [p for p in schema if p["name"] == "cursor"]
    assert cursor["schema"]["anyOf"][0]["pattern"] == "^[0-9]{1,18}$", cursor


# -- defect 6: names over 255 characters; no SQL in a job's error -------------------------------
def test_dataset_name_over_255_characters_is_422(client, engine):
    content = to_csv(*blobs(n=20))
    r = client.post("/datasets", files={"file": ("d.csv", content)}, data={"name": "n" * 256})
    assert_problem(r, 422, "name")
    r = client.post("/datasets", files={"file": ("f" * 252 + ".csv", content)})
    assert "255" in assert_problem(r, 422, "file")["detail"]
    assert _row_counts(engine)["datasets"] == 0
    ds = upload(client, content, filename="f" * 251 + ".csv", name="m" * 255)
    assert ds["name"] == "m" * 255 and len(ds["filename"]) == 255


def test_experiment_over_datasets_with_long_equal_names_succeeds(client, worker):
    """Row names get " (#id)" when names repeat: longer than 255 characters then."""
    name = "x" * 252
    a = upload(client, to_csv(*blobs(n=40, seed=1)), name=name)
    b = upload(client, to_csv(*blobs(n=40, seed=2)), name=name)
    body = {
        "dataset_ids": [a["id"], b["id"]],
        "algorithms": ["msvmav"],
        "splits": 2,
        "cv": 2,
        "grid": {"msvmav": {"alpha": [1], "beta": [1]}},
        "params": {"msvmav": {"max_iter": 10}},
    }
    r = client.post("/experiments", json=body)
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{r.json()['id']}").json()
    results = client.get(f"/experiments/{r.json()['id']}").json()["results"]
    assert [x["name"] for x in results] == [f"{name} (#{a['id']})", f"{name} (#{b['id']})"]


def test_a_database_error_never_shows_sql_or_parameters_in_a_job_error(engine):
    secret = "s3cr3t-parameter"
    with pytest.raises(SQLAlchemyError) as info, engine.connect() as conn:
        conn.execute(text("SELECT no_such_column FROM jobs WHERE kind = :k"), {"k": secret})
    assert "SELECT" in str(info.value)  # the raw error does hold the statement ...
    message = _error_text(info.value)
    assert "SELECT" not in message and secret not in message and "jobs" not in message
    assert "database error" in message  # ... the job's error only says what kind it was


# -- defect 7: formula injection and broken Markdown in the experiment tables ------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1+cmd", "'+1+cmd"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-0.5", "-0.5"),
        ("+1e3", "+1e3"),
        ("0.9684", "0.9684"),
        ("wdbc", "wdbc"),
    ],
)
def test_csv_cell_neutralises_formulas_but_keeps_numbers(value, expected):
    assert csv_cell(value) == expected


def test_markdown_cell_escapes_pipes_and_newlines():
    assert markdown_cell("a|b\nc\r\nd\re") == "a\\|b c d e"


def test_experiment_tables_escape_a_hostile_dataset_name(client, worker):
    hostile = '=HYPERLINK("http://evil","x")|a\nb'
    ds = upload(client, to_csv(*blobs(n=40)), name=hostile)
    plain = upload(client, to_csv(*blobs(n=40, seed=3)), name="-plain")
    body = {
        "dataset_ids": [ds["id"], plain["id"]],
        "algorithms": ["msvmav", "svm"],
        "splits": 2,
        "cv": 2,
        "grid": {"msvmav": {"alpha": [1], "beta": [1]}, "svm": {"C": [1]}},
        "params": {"msvmav": {"max_iter": 10}},
    }
    r = client.post("/experiments", json=body)
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    eid = r.json()["id"]

    rows = list(csv.reader(io.StringIO(client.get(f"/experiments/{eid}/table.csv").text)))
    assert rows[1][0] == "'" + hostile and rows[2][0] == "'-plain"
    assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row)
    assert all(float(cell) >= 0 for cell in rows[1][1:3])  # numbers stay numbers

    md = client.get(f"/experiments/{eid}/table.md").text
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 2 + 1  # header, rule, two data sets, win/tie/loss
    assert all(len(re.split(r"(?<!\\)\|", line)) == len(re.split(r"(?<!\\)\|", table[0]))
               for line in table)
    assert '=HYPERLINK("http://evil","x")\\|a b' in table[2]


# -- defect 8: strict types, bounds, degenerate fits -------------------------------------------
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"alpha": 5e-324}, "alpha"),
        ({"beta": 5e-324}, "beta"),
        ({"gamma": 5e-324, "kernel": "rbf"}, "gamma"),
        ({"alpha": 1e300}, "alpha"),
        ({"coef0": -1e300}, "coef0"),
        ({"alpha": "16"}, "alpha"),
        ({"seed": False}, "seed"),
        ({"max_iter": True}, "max_iter"),
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"test_fraction": "0.2"}, "test_fraction"),
        ({"search": {"cv": "5"}}, "search.cv"),
        ({"algorithm": "svm", "params": {"C": 5e-324}}, "params.C"),
        ({"algorithm": "svm", "params": {"C": 1e300}}, "params.C"),
        ({"algorithm": "svm", "params": {"C": True}}, "params.C"),
        ({"params": {"max_iter": True}}, "params.max_iter"),
        ({"search": {"grid": {"alpha": [1, True]}}}, "search.grid.alpha[1]"),
        ({"search": {"grid": {"alpha": [5e-324]}}}, "search.grid.alpha[0]"),
    ],
)
def test_train_rejects_what_cannot_make_a_finite_model(client, engine, body, field):
    ds = upload(client, to_csv(*blobs(n=20)))
    assert_problem(client.post("/train", json={"dataset_id": ds["id"], **body}), 422, field)
    assert_problem(client.post("/train", json={"dataset_id": str(ds["id"])}), 422, "dataset_id")
    assert _row_counts(engine)["jobs"] == 0


def test_experiment_rejects_coerced_values(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    for body, field in (({"seed": False}, "seed"), ({"splits": "3"}, "splits"),
                        ({"test_size": "0.2"}, "test_size")):
        r = client.post("/experiments", json={"dataset_ids": [ds["id"]], **body})
        assert_problem(r, 422, field)


def test_predict_rejects_booleans_as_feature_values(client, worker):
    model = trained_model(client, worker)
    r = client.post("/predict", json={"model_id": model["id"], "instances": [[1.0, True, 2.0]]})
    assert assert_problem(r, 422, "instances[0]")["column"] == "x1"
    record = {"x0": 1.0, "x1": False, "x2": 0.5}
    r = client.post("/predict", json={"model_id": model["id"], "instances": [record]})
    assert assert_problem(r, 422, "instances[0]")["column"] == "x1"
    r = client.post("/predict", json={"model_id": model["id"], "instances": [[1.0, 2.0, 0.5]]})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("algorithm", ["msvmav", "svm"])
def test_huge_values_without_scaling_fail_with_a_clear_error(client, worker, algorithm):
    lines = ["x0,x1,y"] + [
        f"{(1 + i % 2) * 0.5e308},{i % 7},{'a' if i % 2 == 0 else 'b'}" for i in range(40)
    ]
    ds = upload(client, ("\n".join(lines) + "\n").encode())
    job = submit(client, ds["id"], algorithm=algorithm, scaling="none")
    assert run_jobs(worker) == ["failed"]
    job = client.get(f"/jobs/{job['id']}").json()
    assert job["model_id"] is None
    assert "degenerate model" in job["error"] and "scaling=minmax" in job["error"]
    # the same data scaled trains a real model
    job = submit(client, ds["id"], algorithm=algorithm, scaling="minmax")
    assert run_jobs(worker) == ["succeeded"]


# -- defect 9: conformance ---------------------------------------------------------------------
def test_405_names_every_allowed_method(client):
    r = client.request("PATCH", "/datasets/1")
    assert_problem(r, 405)
    assert {m.strip() for m in r.headers["allow"].split(",")} == {"GET", "DELETE"}
    r = client.put("/datasets")
    assert {m.strip() for m in assert_problem(r, 405) and r.headers["allow"].split(",")} == {
        "GET",
        "POST",
    }


def test_malformed_bodies_are_problem_json(client, engine):
    before = _row_counts(engine)
    json_type = {"content-type": "application/json"}
    r = client.post("/train", content=b'{"dataset_id": 1,', headers=json_type)
    assert_problem(r, 422, "body")
    r = client.post(
        "/datasets",
        content=b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nx',
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code in (400, 422)
    assert_problem(r, r.status_code)
    r = client.post("/predict", content=b"\xff\xfe", headers=json_type)
    assert r.status_code in (400, 422)
    assert_problem(r, r.status_code)
    assert _row_counts(engine) == before


def test_openapi_documents_400_413_422_as_problem_json_for_every_body(app):
    schema = app.openapi()
    with_body = [
        (path, method, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if "requestBody" in op
    ]
    assert len(with_body) >= 4
    for path, method, op in with_body:
        for code in ("400", "413", "422"):
            content = op["responses"][code]["content"]
            assert list(content) == ["application/problem+json"], (path, method, code)


def test_nothing_written_by_rejected_requests(client, engine):
    """The checks above answer before any write: a sweep of them leaves every table as is."""
    ds = upload(client, to_csv(*blobs(n=20)))
    before = _row_counts(engine)
    client.post("/train", json={"dataset_id": ds["id"], "alpha": 5e-324})
    client.post("/train", json={"dataset_id": 2**31})
    client.delete(f"/datasets/{2**63}")
    client.post(f"/jobs/{2**31}/cancel")
    assert _row_counts(engine) == before
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Dataset)).scalar_one() == 1
        assert conn.execute(select(func.count()).select_from(Job)).scalar_one() == 0
