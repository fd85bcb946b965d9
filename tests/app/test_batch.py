"""Batch scoring jobs (POST /batch-predictions): chunked scoring with bad rows skipped or
failing the job, CSV and Parquet results compared row by row with /predict, every input format,
the result's expiry, and the form's unknown fields."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from app.batch.orm import BatchPart
from app.main import create_app, shut_down
from tests.app.batch_support import (  # (shared with other test modules)
    N_ROWS,
    _input_frame,
    _mixed_model,
    _predict,
    _submit,
    _wait_done,
)
from tests.app.support import blobs, to_csv, trained_model


def _with_bad_rows(frame: pd.DataFrame) -> tuple[str, dict[int, tuple[str, str]]]:
    """The frame as CSV text with bad cells in rows 3, 60 (a later chunk) and 229 (the last);
    returns the text and {row: (column, reason fragment)}."""
    bad = {3: ("x1", "not a number"), 60: ("colour", "unknown category"),
           229: ("x0", "missing value")}
    text = frame.astype({"x0": object, "x1": object}).copy()
    text.loc[3, "x1"] = "oops"
    text.loc[60, "colour"] = "purple"
    text.loc[229, "x0"] = ""
    return text.to_csv(index=False), bad


def _check_against_predict(client, model: dict, result: pd.DataFrame, frame: pd.DataFrame,
                           id_column: str) -> None:
    expected = _predict(client, model["id"], frame)
    assert len(result) == len(frame) == expected["n"]
    assert result[id_column].astype(str).tolist() == frame[id_column].astype(str).tolist()
    assert result["label"].tolist() == [p["label"] for p in expected["predictions"]]
    classes = expected["classes"]
    D = np.asarray([p["decision_values"] for p in expected["predictions"]])
    got = result[[f"decision_{c}" for c in classes]].to_numpy()
    np.testing.assert_allclose(got, D, rtol=1e-12, atol=1e-12)
    # the default calibration's probabilities, /predict's to the CSV's precision
    P = np.asarray([[p["probabilities"][str(c)] for c in classes] for p in expected["predictions"]])
    got = result[[f"probability_{c}" for c in classes]].to_numpy()
    np.testing.assert_allclose(got, P, rtol=1e-12, atol=1e-12)
    assert result["note"].tolist() == frame["note"].tolist()


def test_batch_skips_bad_rows_and_matches_predict_row_by_row(client, worker, engine):
    model = _mixed_model(client, worker)
    frame = _input_frame()
    text, bad = _with_bad_rows(frame)
    r = _submit(client, model["id"], text.encode(), id_column="key", passthrough="note",
                on_error="skip")
    assert r.status_code == 202, r.text
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    result = job["result"]
    assert result["chunks"] == 5 and result["n_rows"] == N_ROWS - 3 and result["n_errors"] == 3
    assert [(e["row"], e["line"], e["column"]) for e in result["errors"]] == [
        (row, row + 2, col) for row, (col, _) in sorted(bad.items())]
    for e in result["errors"]:
        assert bad[e["row"]][1] in e["reason"]
    r = client.get(f"/batch-predictions/{job['id']}/result")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    out = pd.read_csv(io.BytesIO(r.content))
    assert list(out.columns) == ["key", "label", "decision_a", "decision_b", "decision_c",
                                 "margin", "probability_a", "probability_b", "probability_c",
                                 "note"]
    good = frame.drop(index=list(bad)).reset_index(drop=True)
    _check_against_predict(client, model, out, good, "key")
    errors = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/errors").content))
    assert errors["row"].tolist() == sorted(bad) and errors["line"].tolist() == [
        r + 2 for r in sorted(bad)]
    with engine.connect() as conn:  # the input is gone once the job succeeded
        kinds = {k for (k,) in conn.execute(BatchPart.__table__.select().with_only_columns(
            BatchPart.kind).where(BatchPart.job_id == job["id"]))}
    assert kinds == {"output", "errors"}


def test_batch_fails_on_the_first_bad_row_naming_line_and_column(client, worker):
    model = _mixed_model(client, worker)
    text, _ = _with_bad_rows(_input_frame())
    r = _submit(client, model["id"], text.encode())
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "failed"
    assert job["error"].startswith("line 5, column 'x1': 'oops' is not a number")
    assert job["message"].startswith("failed: line 5, column 'x1': 'oops' is not a number")
    assert "the 3 rows scored before it stopped are kept" in job["error"]
    r = client.get(f"/batch-predictions/{job['id']}/result")  # the rows before line 5
    assert r.status_code == 200 and r.headers["x-batch-status"] == "failed"
    assert r.headers["x-batch-rows-read"] == "3"
    assert pd.read_csv(io.BytesIO(r.content))["row"].tolist() == [0, 1, 2]


def test_batch_parquet_output_matches_predict(client, worker):
    model = _mixed_model(client, worker)
    frame = _input_frame()
    r = _submit(client, model["id"], frame.to_csv(index=False).encode(), output="parquet",
                id_column="key", passthrough="note")
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    r = client.get(f"/batch-predictions/{job['id']}/result")
    assert r.status_code == 200
    table = pq.read_table(io.BytesIO(r.content))
    assert table.num_rows == N_ROWS
    _check_against_predict(client, model, table.to_pandas(), frame, "key")


def _encode(frame: pd.DataFrame, fmt: str) -> tuple[bytes, str]:
    if fmt == "parquet":
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buf,
                       row_group_size=70)
        return buf.getvalue(), "rows.parquet"
    if fmt == "jsonl":
        lines = "\n".join(json.dumps(r) for r in frame.to_dict("records"))
        return lines.encode(), "rows.jsonl"
    if fmt == "arff":
        head = ["% scored rows", "@relation rows", "@attribute key string",
                "@attribute x0 numeric", "@attribute x1 numeric",
                "@attribute colour {red,green,blue}", "@attribute note string", "@data"]
        rows = [f"{r.key},{r.x0!r},{r.x1!r},{r.colour},'{r.note}'" for r in frame.itertuples()]
        return "\n".join(head + rows).encode(), "rows.arff"
    if fmt == "tsv":
        return frame.to_csv(index=False, sep="\t").encode(), "rows.tsv"
    if fmt == "whitespace":
        return frame.to_csv(index=False, sep=" ").encode(), "rows.dat"
    return frame.to_csv(index=False).encode(), "rows.csv"


@pytest.mark.parametrize("fmt", ["csv", "tsv", "whitespace", "parquet", "jsonl", "arff"])
def test_batch_reads_every_format(client, worker, fmt):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=120)
    content, filename = _encode(frame, fmt)
    r = _submit(client, model["id"], content, filename, id_column="key", passthrough="note")
    assert r.status_code == 202, r.text
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    # (Parquet: batches of at most 50 rows within row groups of 70: 50, 20, 50 or finer)
    assert job["result"]["chunks"] == 3 or fmt == "parquet"
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content))
    _check_against_predict(client, model, out, frame, "key")


def test_batch_row_numbers_without_id_column(client, worker):
    X, y = blobs(n=80)
    model = trained_model(client, worker, to_csv(X, y))
    Xn = blobs(n=75, seed=5)[0].round(6)  # as to_csv writes them
    content = to_csv(Xn, ["pos"] * 75)
    r = _submit(client, model["id"], content)
    job = _wait_done(client, worker, r.json()["id"])
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content))
    assert list(out.columns) == ["row", "label", "decision_value", "margin", "probability_neg",
                                 "probability_pos"]
    assert out["row"].tolist() == list(range(75))
    expected = client.post("/predict", json={"model_id": model["id"],
                                             "instances": Xn.tolist()}).json()
    np.testing.assert_allclose(out["decision_value"],
                               [p["decision_value"] for p in expected["predictions"]],
                               rtol=1e-12, atol=1e-12)


def test_batch_scores_a_stored_dataset(client, worker):
    X, y = blobs(n=80)
    model = trained_model(client, worker, to_csv(X, y))
    r = client.post("/batch-predictions", data={"model_id": str(model["id"]),
                                                "dataset_id": str(model["dataset_id"]),
                                                "chunk_rows": "30"})
    assert r.status_code == 202, r.text
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content))
    expected = client.post("/predict", json={"model_id": model["id"],
                                             "instances": X.round(6).tolist()}).json()
    assert out["label"].tolist() == [p["label"] for p in expected["predictions"]]
    np.testing.assert_allclose(out["decision_value"],
                               [p["decision_value"] for p in expected["predictions"]],
                               rtol=1e-12, atol=1e-12)


def test_batch_request_errors_name_the_field(client, worker):
    X, y = blobs(n=80)
    model = trained_model(client, worker, to_csv(X, y))
    content = to_csv(*blobs(n=10))
    r = _submit(client, model["id"], content, labl="y")
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "labl"
    r = _submit(client, model["id"], content, id_column="nope")
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "id_column"
    r = _submit(client, model["id"], b"a,b\n1,2\n")
    assert r.status_code == 422 and "x0" in r.json()["detail"]
    r = client.post("/batch-predictions", data={"model_id": str(model["id"])})
    assert r.status_code == 422
    r = _submit(client, model["id"], b"x" * 70_000 + b"\n1\n")
    assert r.status_code == 422 and "first line is longer" in r.json()["detail"]
    wide = (",".join(f"c{j}" for j in range(300)) + "\n").encode() + content
    client.app.state.settings.max_features = 200
    r = _submit(client, model["id"], wide)
    assert r.status_code == 413 and "300 columns" in r.json()["detail"]
    r = _submit(client, 999999, content)
    assert r.status_code == 404 and r.json()["errors"][0]["field"] == "model_id"
    r = client.get("/batch-predictions/999999/result")
    assert r.status_code == 404


def test_unknown_form_fields_are_refused_on_every_form_route(client, worker):
    X, y = blobs(n=80)
    content = to_csv(X, y)
    r = client.post("/datasets", files={"file": ("d.csv", content)}, data={"labl": "y"})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "labl"
    model = trained_model(client, worker, content)
    r = client.post("/predict/file", files={"file": ("d.csv", content)},
                    data={"model_id": str(model["id"]), "lable": "y"})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "lable"


def test_batch_result_expires(client, worker, app):
    X, y = blobs(n=80)
    model = trained_model(client, worker, to_csv(X, y))
    r = _submit(client, model["id"], to_csv(*blobs(n=20)))
    job = _wait_done(client, worker, r.json()["id"])
    assert client.get(f"/batch-predictions/{job['id']}/result").status_code == 200
    app.state.settings.batch_result_hours = 1e-9
    assert client.get(f"/batch-predictions/{job['id']}/result").status_code == 410


def test_predict_file_skips_bad_rows_and_names_them(client, worker):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=62).drop(columns=["key", "note"]).astype({"x1": object})
    frame.loc[3, "x1"] = "oops"
    frame.loc[60, "colour"] = "purple"
    text = frame.to_csv(index=False)
    ids = [f"r{i}" for i in range(62)]
    data = {"model_id": str(model["id"]), "ids": json.dumps(ids)}
    r = client.post("/predict/file", files={"file": ("rows.csv", text.encode())}, data=data)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "file"
    r = client.post("/predict/file", files={"file": ("rows.csv", text.encode())},
                    data={**data, "on_error": "skip"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["skipped"]["n"] == 2
    assert [(e["row"], e["line"], e["column"]) for e in body["skipped"]["errors"]] == [
        (3, 5, "x1"), (60, 62, "colour")]
    assert "'oops' is not a number" in body["skipped"]["errors"][0]["reason"]
    good = pd.read_csv(io.StringIO(text)).drop(index=[3, 60]).reset_index(drop=True)
    expected = _predict(client, model["id"], good)
    assert body["n"] == 60
    assert [p["id"] for p in body["predictions"]] == [i for k, i in enumerate(ids)
                                                       if k not in (3, 60)]
    assert [p["decision_values"] for p in body["predictions"]] == [
        p["decision_values"] for p in expected["predictions"]]


def test_batch_upload_limit_is_its_own(client, worker, settings):
    """A batch file may be larger than MSVMAV_MAX_UPLOAD_BYTES (the body limit on this path is
    MSVMAV_BATCH_MAX_UPLOAD_BYTES), and one over its own limit is a 413."""
    X, y = blobs(n=80)
    model = trained_model(client, worker, to_csv(X, y))
    content = to_csv(*blobs(n=40_000, seed=2))  # beyond the body limit's 1 MiB of slack
    small = settings.model_copy(update={"max_upload_bytes": 100_000,
                                        "batch_max_upload_bytes": len(content) * 2})
    app = create_app(small)
    try:
        with TestClient(app) as other:
            r = other.post("/datasets", files={"file": ("d.csv", content)})
            assert r.status_code == 413 and "MSVMAV_MAX_UPLOAD_BYTES" in r.text
            r = _submit(other, model["id"], content)
            assert r.status_code == 202, r.text
            other.app.state.settings.batch_max_upload_bytes = len(content) - 1
            r = _submit(other, model["id"], content)
            assert r.status_code == 413 and "MSVMAV_BATCH_MAX_UPLOAD_BYTES" in r.text
    finally:
        shut_down(app)
