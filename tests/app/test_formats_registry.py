"""The one format registry (app.ingest.formats) and every file door reading every format:
Parquet and JSON Lines uploads give the CSV's dataset, /predict/file takes Parquet, JSON Lines
and svmlight, and the hostile files of issue 45 are refused or read within measured bounds."""

from __future__ import annotations

import io
import json
import threading
import time
import tracemalloc
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.batch.formats import INPUT_FORMATS
from app.batch.formats import detect_format as batch_detect
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.ingest import formats
from app.main import create_app, shut_down
from tests.app.support import SHARED_DATASETS, assert_problem, run_jobs, submit, upload

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SAME = ("n_rows", "n_features", "sparse", "feature_names", "classes", "class_counts")


def _bank(n: int = 600) -> pd.DataFrame:
    return pd.read_csv(SHARED_DATASETS / "bank-full.csv", sep=";", nrows=n)


def _parquet(frame: pd.DataFrame | pa.Table, **kw) -> bytes:
    out = io.BytesIO()
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame,
                                                                          preserve_index=False)
    pq.write_table(table, out, **kw)
    return out.getvalue()


def _jsonl(frame: pd.DataFrame) -> bytes:
    return frame.to_json(orient="records", lines=True).encode()


def _arrays(engine, dataset_id: int):
    with Session(engine) as session:
        return datasets.load_arrays(session, session.get(Dataset, dataset_id))


@contextmanager
def arrow_peak():
    """The most bytes Arrow's pool and Python held at once while the block ran (a thread
    samples Arrow's pool; tracemalloc gives Python's peak): ``peak[0]`` after the block."""
    peak = [0]
    base = pa.total_allocated_bytes()
    done = threading.Event()

    def sample() -> None:
        top = 0
        while not done.wait(0.001):
            top = max(top, pa.total_allocated_bytes() - base)
        peak[0] = top

    tracemalloc.start()
    thread = threading.Thread(target=sample)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()
        _, python_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        peak[0] += python_peak


# --- the registry ------------------------------------------------------------------------------

@pytest.mark.parametrize(("head", "filename", "declared", "name"), [
    (b"a,b\n1,2\n", "x.bin", "libsvm", "svmlight"),
    (b"a,b\n1,2\n", "x.bin", "NDJSON", "jsonl"),
    (b"a,b\n1,2\n", "rows.parquet", None, "parquet"),
    (b"a,b\n1,2\n", "rows.jsonl", None, "jsonl"),
    (b"a\tb\n", "rows.TSV", None, "tsv"),
    (b"PAR1\x15\x04", "upload", None, "parquet"),
    (b'\n{"a": 1, "y": 0}\n{"a": 2, "y": 1}\n', "", None, "jsonl"),
    (b"% comment\n@relation r\n@attribute a numeric\n", "", None, "arff"),
    (b"+1 1:0.5 3:2\n-1 2:1\n", "", None, "svmlight"),
    (b"a\tb\n1\t2\n", "", None, "tsv"),
    (b"a;b\n1;2\n", "", None, "csv"),
    (b"1 2 3\n4 5 6\n", "", None, "whitespace"),
])
def test_registry_detects_by_option_then_extension_then_content(head, filename, declared, name):
    assert formats.detect(head, filename, declared).name == name


def test_registry_refuses_an_unknown_format_naming_the_known_ones(client) -> None:
    r = client.post("/datasets", files={"file": ("d.csv", b"a,y\n1,0\n2,1\n")},
                    data={"format": "xlsx"})
    body = assert_problem(r, 422, "format")
    assert all(n in body["detail"] for n in ("parquet", "jsonl", "svmlight", "arff"))


def test_batch_detection_and_formats_come_from_the_registry() -> None:
    assert INPUT_FORMATS == formats.NAMES
    assert batch_detect(b"PAR1", "x", None) == "parquet"
    assert batch_detect(b'{"a": 1}\n', "x", None) == "jsonl"
    assert batch_detect(b"1 2\n3 4\n", "x.pq", None) == "parquet"
    assert batch_detect(b"+1 1:2 3:1\n", "x", None) == "svmlight"
    assert batch_detect(b"1 2\n3 4\n", "x", None) == "whitespace"
    assert batch_detect(b"a,b\n", "x", "tsv") == "tsv"


# --- uploads: Parquet and JSON Lines give the CSV's dataset -------------------------------------

@pytest.mark.parametrize("kind", ["parquet", "jsonl"])
def test_columnar_upload_gives_the_csv_dataset(client, engine, kind) -> None:
    frame = _bank()
    csv = upload(client, frame.to_csv(index=False).encode(), "bank.csv", label="y")
    content = _parquet(frame) if kind == "parquet" else _jsonl(frame)
    name = "bank.parquet" if kind == "parquet" else "bank.jsonl"
    other = upload(client, content, name, label="y")
    assert other["format"] == kind
    assert {k: other[k] for k in SAME} == {k: csv[k] for k in SAME}
    assert "job=management" in other["feature_names"]  # columns by name, not x0 .. x16
    (Xc, yc), (Xo, yo) = _arrays(engine, csv["id"]), _arrays(engine, other["id"])
    assert np.array_equal(Xc, Xo) and list(yc) == list(yo)


def test_columnar_upload_detected_by_content_and_with_missing_values(client, engine) -> None:
    frame = _bank(200)[["age", "balance", "job", "y"]].copy()
    frame.loc[[3, 7], "balance"] = np.nan
    content = _parquet(frame)
    assert content.startswith(b"PAR1")
    body = assert_problem(client.post("/datasets", files={"file": ("upload", content)}), 422,
                          "missing")
    assert "row 4" in body["detail"] and "line" not in body["detail"]  # (Parquet: rows)
    dropped = upload(client, content, "upload", missing="drop")
    assert dropped["n_rows"] == 198 and dropped["n_rows_dropped"] == 2
    csv = upload(client, frame.to_csv(index=False).encode(), "b.csv", missing="drop")
    jsonl = upload(client, _jsonl(frame), "upload", missing="drop")
    assert {k: jsonl[k] for k in SAME} == {k: csv[k] for k in SAME} == {
        k: dropped[k] for k in SAME}
    assert np.array_equal(_arrays(engine, csv["id"])[0], _arrays(engine, jsonl["id"])[0])


def test_parquet_with_a_duplicated_column_is_422_naming_it(client) -> None:
    table = pa.Table.from_arrays([pa.array([1.0, 2.0, 3.0]), pa.array([4.0, 5.0, 6.0]),
                                  pa.array([0, 1, 0])], names=["age", "age", "y"])
    body = assert_problem(client.post("/datasets", files={"file": ("d.parquet",
                                                                    _parquet(table))}), 422)
    assert "'age'" in body["detail"] and "AttributeError" not in body["detail"]
    assert body["errors"][0]["column"] == "age"


@pytest.mark.parametrize("line", ["[1, 2, 3]", "1", "null", '"x"'])
def test_jsonl_line_that_is_not_an_object_is_422_naming_it(client, line) -> None:
    content = f'{{"a": 1, "y": 0}}\n{{"a": 2, "y": 1}}\n{line}\n'.encode()
    body = assert_problem(client.post("/datasets", files={"file": ("d.jsonl", content)}), 422)
    assert body["errors"][0]["row"] == 3 and "Line 3" in body["detail"]


def test_parquet_bomb_in_an_unused_column_is_never_decoded(worker, client) -> None:
    """A 100 KB string repeated in every row of a dropped column, dictionary-encoded and
    compressed: ~10 KB on disk, 400 MB decoded. Only the used columns are read."""
    n = 4000
    frame = _bank(n)[["age", "balance", "y"]].copy()
    frame["blob"] = "z" * 100_000
    content = _parquet(frame, compression="zstd")
    assert len(content) < 200_000
    with arrow_peak() as peak:
        started = time.perf_counter()
        ds = upload(client, content, "bomb.parquet", drop="blob", label="y")
        took = time.perf_counter() - started
    assert ds["n_rows"] == n and ds["feature_names"] == ["age", "balance"]
    assert peak[0] < 50_000_000, peak  # decoded: 400 MB
    assert took < 10
    # /predict/file of a model that does not use it either
    worker_model = _model_on(client, worker, ds["id"])
    with arrow_peak() as peak:
        r = client.post("/predict/file", data={"model_id": str(worker_model)},
                        files={"file": ("bomb.parquet", content)})
    assert r.status_code == 200, r.text
    assert r.json()["n"] == n and r.json()["accuracy"] is not None
    assert peak[0] < 50_000_000, peak


def test_parquet_bomb_in_a_used_column_is_typed_once_per_distinct_value(client) -> None:
    """The same bomb kept as a feature (not dropped): typing the column row by row copied the
    100 KB string into every row (Arrow's take, then a Python string each: 8 GB for 40,000
    rows, 15 KB on disk); typed on its distinct values it stays one string."""
    n = 2000
    frame = _bank(n)[["age", "balance", "y"]].copy()
    frame["blob"] = "z" * 100_000
    content = _parquet(frame, compression="zstd")
    with arrow_peak() as peak:
        ds = upload(client, content, "bomb.parquet", label="y")
    assert ds["n_rows"] == n and ds["feature_names"][:2] == ["age", "balance"], ds
    assert peak[0] < 40_000_000, peak  # decoded: 200 MB (without the fix: twice that)
    same = _parquet(frame.assign(blob="short"))
    assert upload(client, same, "short.parquet", label="y")["n_features"] == ds["n_features"]


def _model_on(client: TestClient, worker, dataset_id: int) -> int:
    job = submit(client, dataset_id, max_iter=20)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    return client.get(f"/jobs/{job['id']}").json()["model_id"]


# --- /predict/file: every format through the same readers ---------------------------------------

def test_predict_file_takes_parquet_jsonl_and_csv_alike(worker, client) -> None:
    frame = _bank(300)
    ds = upload(client, frame.to_csv(index=False).encode(), "bank.csv", label="y")
    model = _model_on(client, worker, ds["id"])
    answers = {}
    for name, content in (("p.csv", frame.to_csv(index=False).encode()),
                          ("p.parquet", _parquet(frame)), ("p.jsonl", _jsonl(frame)),
                          ("upload", _parquet(frame.drop(columns="y")))):
        r = client.post("/predict/file", data={"model_id": str(model)},
                        files={"file": (name, content)})
        assert r.status_code == 200, (name, r.text)
        answers[name] = r.json()
    labels = [[p["label"] for p in a["predictions"]] for a in answers.values()]
    assert all(x == labels[0] for x in labels)
    decisions = [[p["decision_value"] for p in a["predictions"]] for a in answers.values()]
    assert all(x == decisions[0] for x in decisions)
    assert answers["p.parquet"]["accuracy"] == answers["p.csv"]["accuracy"] is not None
    assert answers["upload"]["accuracy"] is None
    missing = frame.drop(columns="job")
    body = assert_problem(client.post("/predict/file", data={"model_id": str(model)},
                                      files={"file": ("p.jsonl", _jsonl(missing))}), 422)
    assert "'job'" in body["detail"]


def test_predict_file_takes_svmlight_for_an_svmlight_model(worker, client) -> None:
    text = (SHARED_DATASETS / "german.numer_scale.txt").read_bytes()
    ds = upload(client, text, "german.svm")
    model = _model_on(client, worker, ds["id"])
    head = b"\n".join(text.splitlines()[:50]) + b"\n"
    r = client.post("/predict/file", data={"model_id": str(model)},
                    files={"file": ("rows.txt", head)})
    assert r.status_code == 200, r.text
    assert r.json()["n"] == 50 and r.json()["accuracy"] is not None


# --- hostile inputs, measured -----------------------------------------------------------------

def _wide_arff(n_attributes: int, rows: int = 4) -> bytes:
    lines = ["@relation wide"]
    lines += [f"@attribute a{j} numeric" for j in range(n_attributes - 1)]
    lines += ["@attribute class {neg,pos}", "@data"]
    for i in range(rows):
        values = [str(i % 2 * 2 + (i * 7 + j) % 5 / 10) for j in range(n_attributes - 1)]
        lines.append(",".join([*values, "pos" if i % 2 else "neg"]))
    return ("\n".join(lines) + "\n").encode()


def test_arff_header_of_60000_attributes_is_read_in_linear_time(client, app) -> None:
    content = _wide_arff(60_000)
    assert len(content) > 1_400_000
    small = create_app(app.state.settings.model_copy(update={"max_features": 1000}))
    try:
        with TestClient(small) as c:
            started = time.perf_counter()
            r = c.post("/datasets", files={"file": ("wide.arff", content)})
            took = time.perf_counter() - started
        body = assert_problem(r, 413)
        assert body["errors"][0]["row"] == 2 + 1000 + 1024  # the first attribute beyond
        assert took < 3, took
    finally:
        shut_down(small)
    started = time.perf_counter()  # within the limits: read whole, in linear time (was ~60 s)
    ds = upload(client, content, "wide.arff")
    assert ds["n_features"] == 59_999
    assert time.perf_counter() - started < 15


def test_arff_of_60000_attributes_to_predict_file_is_refused_at_the_column_bound(worker,
        client, app) -> None:
    ds = upload(client, _wide_arff(4, rows=60), "narrow.arff")
    model = _model_on(client, worker, ds["id"])
    started = time.perf_counter()
    r = client.post("/predict/file", data={"model_id": str(model)},
                    files={"file": ("wide.arff", _wide_arff(60_000))})
    took = time.perf_counter() - started
    assert_problem(r, 413)
    assert took < 2, took


def test_a_190_mb_field_is_refused_before_it_is_parsed(client) -> None:
    content = b"a,b,y\n1,2,0\n3,4,1\n5," + b"7" * 190_000_000 + b",1\n"
    started = time.perf_counter()  # the control: the same body, refused by form validation
    assert_problem(client.post("/datasets", files={"file": ("big.csv", content)},
                               data={"name": "n" * 1000}), 422)
    control = time.perf_counter() - started
    tracemalloc.start()
    started = time.perf_counter()
    r = client.post("/datasets", files={"file": ("big.csv", content)})
    took = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    body = assert_problem(r, 413)
    assert body["errors"][0]["row"] == 4 and "Line 4" in body["detail"]
    # the time to send and receive the body, and not more (was 20 s more and +1.7 GB)
    assert took < control + 2, (took, control)
    # the client's and the multipart parser's copies of the body, no parsed text
    assert peak < 4 * 190_000_000, peak


def test_a_million_row_csv_to_predict_file_is_413_before_it_is_parsed(worker, client) -> None:
    ds = upload(client, b"a,b,y\n" + b"".join(b"%d,%d,%d\n" % (i, i % 7, i % 2)
                                               for i in range(200)), "t.csv")
    model = _model_on(client, worker, ds["id"])
    row = b"0.123456789,1.23456789,1\n"
    content = b"a,b,y\n" + row * 1_000_000

    def post(model_id: str):
        tracemalloc.start()
        started = time.perf_counter()
        r = client.post("/predict/file", data={"model_id": model_id},
                        files={"file": ("big.csv", content)})
        took = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return r, took, peak

    # the control: the same body, refused by form validation (sent, received, not read)
    control, control_took, control_peak = post("not-a-number")
    assert control.status_code == 422
    r, took, peak = post(str(model))
    body = assert_problem(r, 413)
    assert "1000000" in body["detail"] and body["errors"][0]["field"] == "file"
    assert took < control_took + 2, (took, control_took)  # (was 54.7 s)
    # the upload read once, nothing parsed (was +2.1 GB for 88 MB)
    assert peak < control_peak + 1.5 * len(content), (peak, control_peak, len(content))


def test_jsonl_line_with_too_many_keys_is_refused_without_parsing_it(worker, client) -> None:
    ds = upload(client, _wide_arff(4, rows=60), "narrow.arff")
    model = _model_on(client, worker, ds["id"])
    rows = [json.dumps({"a0": 1, "a1": 1, "a2": 1}) for _ in range(5)]
    rows.append(json.dumps({f"k{j}": j for j in range(300_000)}))
    content = ("\n".join(rows) + "\n").encode()
    started = time.perf_counter()
    r = client.post("/predict/file", data={"model_id": str(model)},
                    files={"file": ("d.jsonl", content)})
    took = time.perf_counter() - started
    body = assert_problem(r, 413)
    assert body["errors"][0]["row"] == 6
    assert took < 2, took
