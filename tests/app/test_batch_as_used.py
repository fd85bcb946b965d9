"""Batch jobs as their users run them (issue 45): every kind of bad line reported once with its
line and skipped under on_error=skip (CSV, ARFF, JSON Lines, svmlight); a failed job serving
what it scored; Parquet output keeping the input's types; the download's format chosen at
download; a dataset by reference scored without spelling out its output; hostile Parquet and
JSON Lines inputs bounded in memory and time; a download whose files expire while it is read
cut off, never ended short as if whole."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session

from app.batch import service, store
from app.jobs.orm import Job
from tests.app.batch_support import _input_frame, _mixed_model, _predict, _submit, _wait_done
from tests.app.reference_support import frame as reference_frame
from tests.app.reference_support import (  # noqa: F401  (fixtures: the app's data root)
    root_fixture,
    settings_fixture,
    write_parts,
)
from tests.app.support import blobs, run_jobs, submit, upload

ROOT = Path(__file__).resolve().parents[2]



def _bad_csv(frame: pd.DataFrame) -> tuple[bytes, dict[int, str]]:
    """The frame as CSV with a bad line of every kind; {row: reason fragment}. Rows are
    data rows (0-based); each row's line is row + 2 (the header is line 1)."""
    lines = frame.to_csv(index=False).splitlines()
    bad = {3: "not a number", 10: "6 fields", 20: "4 fields", 45: "6 fields",
           60: "unknown category", 70: "not UTF-8", 150: "missing value",
           180: "infinite value", 229: "missing value"}
    row = lambda k: lines[k + 1].split(",")  # noqa: E731
    lines[3 + 1] = ",".join([*row(3)[:2], "oops", *row(3)[3:]])
    lines[10 + 1] += ",extra"
    lines[20 + 1] = ",".join(row(20)[:4])
    lines[45 + 1] = ",".join(row(45)[:4]) + ',"a","b"'  # quoted: the tokenizer finds it
    lines[60 + 1] = ",".join([*row(60)[:3], "purple", row(60)[4]])
    lines[150 + 1] = ""  # a blank line: a row of missing values
    lines[180 + 1] = ",".join([row(180)[0], "inf", *row(180)[2:]])
    lines[229 + 1] = ",".join([row(229)[0], "", *row(229)[2:]])
    lines[5 + 1] = ",".join(row(5)[:4]) + ',"a, quoted, note"'  # a good row with commas
    data = "\n".join(lines).encode() + b"\n"
    data = data.replace(lines[70 + 1].encode(), lines[70 + 1].encode() + b"\xff\xfe")
    return data, bad


def _errors(client, job_id: int) -> pd.DataFrame:
    r = client.get(f"/batch-predictions/{job_id}/errors")
    assert r.status_code == 200, r.text
    return pd.read_csv(io.BytesIO(r.content), keep_default_na=False)


def test_skip_reports_every_kind_of_bad_line_once_with_its_line(client, worker):
    model = _mixed_model(client, worker)
    frame = _input_frame()
    content, bad = _bad_csv(frame)
    r = _submit(client, model["id"], content, id_column="key", passthrough="note",
                on_error="skip")
    assert r.status_code == 202, r.text
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    assert job["result"]["n_errors"] == len(bad)
    assert job["result"]["n_rows"] == len(frame) - len(bad)
    errors = _errors(client, job["id"])
    assert errors["row"].tolist() == sorted(bad)
    assert errors["line"].tolist() == [k + 2 for k in sorted(bad)]
    for k, reason in zip(errors["row"], errors["reason"], strict=True):
        assert bad[k] in reason, (k, reason)
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content))
    good = frame.drop(index=list(bad)).reset_index(drop=True)
    assert out["key"].tolist() == good["key"].tolist()
    assert out.loc[out["key"] == "k0005", "note"].item() == "a, quoted, note"
    expected = _predict(client, model["id"], good)
    assert out["label"].tolist() == [p["label"] for p in expected["predictions"]]
    # on_error=fail: the first bad line stops the job, naming it
    job = _wait_done(client, worker, _submit(client, model["id"], content).json()["id"])
    assert job["status"] == "failed"
    assert job["error"].startswith("line 5, column 'x1': 'oops' is not a number")


def test_an_extra_field_in_arff_makes_only_its_line_bad(client, worker):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=40)
    head = ["@relation rows", "@attribute key string", "@attribute x0 numeric",
            "@attribute x1 numeric", "@attribute colour {red,green,blue}",
            "@attribute note string", "@data"]
    rows = [f"{r.key},{r.x0!r},{r.x1!r},{r.colour},'{r.note}'" for r in frame.itertuples()]
    rows[7] += ",9"
    rows[20:20] = ["% a comment in the data", ""]  # lines, not rows
    content = "\n".join(head + rows).encode()
    r = _submit(client, model["id"], content, "rows.arff", id_column="key", on_error="skip",
                chunk_rows="10")
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    assert job["result"]["n_errors"] == 1 and job["result"]["n_rows"] == 39
    errors = _errors(client, job["id"])
    assert errors[["row", "line"]].values.tolist() == [[7, len(head) + 8]]
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content))
    good = frame.drop(index=[7]).reset_index(drop=True)
    assert out["key"].tolist() == good["key"].tolist()
    expected = _predict(client, model["id"], good)
    np.testing.assert_allclose(out[["decision_a", "decision_b", "decision_c"]].to_numpy(),
                               [p["decision_values"] for p in expected["predictions"]],
                               rtol=1e-12, atol=1e-12)


def test_json_lines_that_are_not_objects_are_bad_lines(client, worker, settings):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=30)
    lines = [json.dumps(r) for r in frame.to_dict("records")]
    settings.max_features = 100
    bombs = {2: "[1,2,3]", 5: "1", 9: "null", 12: '"x"', 15: '{"x0": ',
             21: json.dumps({f"k{j}": j for j in range(5000)})}
    for k, text in bombs.items():
        lines[k] = text
    r = _submit(client, model["id"], "\n".join(lines).encode(), "rows.jsonl",
                id_column="key", on_error="skip", chunk_rows="7")
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    errors = _errors(client, job["id"])
    assert errors["line"].tolist() == [k + 1 for k in sorted(bombs)]
    reasons = errors["reason"].tolist()
    assert "an array" in reasons[0] and "a number" in reasons[1] and "null" in reasons[2]
    assert "a string" in reasons[3] and "not valid JSON" in reasons[4]
    assert "more than 100 keys" in reasons[5]
    job = _wait_done(client, worker, _submit(client, model["id"], "\n".join(lines).encode(),
                                             "rows.jsonl").json()["id"])
    assert job["status"] == "failed" and job["error"].startswith("line 3: the line is an array")


_KEYS_SCRIPT = """
import io, json, sys, time, tracemalloc
from app.batch.readers import Layout, read_chunks
good = json.dumps({"x0": 1.0, "x1": 2.0, "colour": "red"})
bomb = json.dumps({f"k{j}": j for j in range(1_000_000)})
data = ("\\n".join([good] * 5 + [bomb] + [good] * 5) + "\\n").encode()
layout = Layout(fmt="jsonl", delimiter=None, header=True, names=None, chunk_rows=4,
                features=["x0", "x1", "colour"], text_columns=[], max_columns=1000)
tracemalloc.start()
begun = time.perf_counter()
chunks = list(read_chunks(io.BytesIO(data), len(data), layout))
elapsed = time.perf_counter() - begun
print(json.dumps({"bad": [[b.row, b.line] for c in chunks for b in c.bad],
                  "rows": sum(len(c.frame) for c in chunks), "line": len(bomb),
                  "peak": tracemalloc.get_traced_memory()[1], "seconds": elapsed}))
"""


def test_a_json_line_of_a_million_keys_is_refused_in_bounded_memory():
    """The keys-per-line limit holds on every line, before the line is parsed: a million-key
    sixth line costs about its own size, not a parsed million-entry object (measured in a
    process of its own)."""
    out = subprocess.run([sys.executable, "-c", _KEYS_SCRIPT], capture_output=True, text=True,
                         cwd=ROOT, timeout=300, check=True)
    got = json.loads(out.stdout)
    assert got["bad"] == [[5, 6]] and got["rows"] == 10
    assert got["peak"] <= 4 * got["line"], got
    assert got["seconds"] < 5.0, got


def _typed_frame(n: int) -> pd.DataFrame:
    frame = _input_frame(n=n)
    return frame.assign(key=np.arange(1000, 1000 + n, dtype=np.int64),
                        count=np.arange(n, dtype=np.int32),
                        when=pd.date_range("2026-01-01", periods=n, freq="h"),
                        ratio=np.linspace(0, 1, n))


def test_parquet_output_keeps_the_input_types_and_the_format_is_chosen_at_download(
    client, worker
):
    model = _mixed_model(client, worker)
    frame = _typed_frame(120)
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    r = _submit(client, model["id"], buf.getvalue(), "rows.parquet", id_column="key",
                passthrough="note,count,when,ratio", output="parquet")
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    url = f"/batch-predictions/{job['id']}/result"
    table = pq.read_table(io.BytesIO(client.get(url).content))
    schema = pa.Schema.from_pandas(frame, preserve_index=False)
    for name in ["key", "count", "when", "ratio"]:
        assert table.schema.field(name).type == schema.field(name).type, name
    assert table.column("note").to_pylist() == frame["note"].tolist()
    assert table.column("key").to_pylist() == frame["key"].tolist()
    r = client.get(url, params={"format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    as_csv = pd.read_csv(io.BytesIO(r.content))
    assert as_csv["key"].tolist() == frame["key"].tolist()
    np.testing.assert_allclose(as_csv["decision_a"], table.column("decision_a").to_numpy(),
                               rtol=1e-15)
    r = client.get(url, params={"format": "jsonl"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in r.text.splitlines()]
    assert [row["key"] for row in rows] == frame["key"].tolist()
    assert [row["count"] for row in rows] == list(range(120))
    assert client.get(url, params={"format": "xml"}).status_code == 422


def test_json_lines_ids_keep_their_types_across_chunks(client, worker):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=60).assign(key=np.arange(60))
    records = frame.to_dict("records")
    for r in records[50:]:
        r["key"] = float(r["key"]) + 0.5  # a later chunk widens the ids to numbers
    content = "\n".join(json.dumps(r) for r in records).encode()
    r = _submit(client, model["id"], content, "rows.jsonl", id_column="key", output="parquet")
    job = _wait_done(client, worker, r.json()["id"])
    table = pq.read_table(io.BytesIO(
        client.get(f"/batch-predictions/{job['id']}/result").content))
    assert table.schema.field("key").type == pa.float64()
    assert table.column("key").to_pylist() == [r["key"] for r in records]


def test_a_reference_dataset_is_scored_without_naming_its_output(client, worker, root):
    write_parts(reference_frame(), root / "clicks")
    ref = client.post("/datasets/references", json={"uri": str(root / "clicks"),
                                                    "label": "label"})
    assert ref.status_code == 201, ref.text
    job = submit(client, ref.json()["id"], max_iter=40)
    run_jobs(worker)
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    r = client.post("/batch-predictions", data={"dataset_id": ref.json()["id"],
                                                "model_id": model_id})
    assert r.status_code == 202, r.text
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded" and job["result"]["output"] == "parquet", job


def test_a_parquet_file_with_a_column_named_twice_is_a_422_naming_it(client, worker):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=10)
    table = pa.Table.from_arrays([pa.array(frame[c]) for c in frame.columns] + [
        pa.array(frame["x0"])], names=[*frame.columns, "x0"])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    r = _submit(client, model["id"], buf.getvalue(), "rows.parquet")
    assert r.status_code == 422, r.text
    body = r.json()
    assert "two columns named 'x0'" in body["detail"] and "Error" not in body["detail"]


_RSS_SCRIPT = """
import io, sys
import pyarrow as pa
import pyarrow.parquet as pq
from app.batch.readers import Layout, read_chunks
path, passthrough = sys.argv[1], sys.argv[2:]
layout = Layout(fmt="parquet", delimiter=None, header=True, names=None, chunk_rows=1000,
                features=["x0", "x1", "colour"], text_columns=passthrough)
with open(path, "rb") as f:  # a warm-up read of 5 rows (a 1-byte blob), then the measured one
    small = pq.ParquetFile(f).read_row_group(0, columns=["x0", "x1", "colour"]).slice(0, 5)
    warm = io.BytesIO()
    pq.write_table(small.append_column("blob", pa.array(["z"] * 5)), warm)
    list(read_chunks(io.BytesIO(warm.getvalue()), 0, layout))
def peak():  # this process's own high-water RSS (ru_maxrss would carry the forking parent's)
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0])
before = peak()
with open(path, "rb") as f:
    chunks = list(read_chunks(f, 0, layout))
after = peak()
print((after - before) * 1024, sum(len(c.frame) for c in chunks),
      sum(len(c.extra) for c in chunks if c.extra is not None and passthrough))
"""


def _bomb(path: Path, n: int = 4000) -> int:
    """A small Parquet file whose 'blob' column, one 100 KB string repeated (dictionary
    encoded, zstd), decodes to n x 100 KB; returns the decoded size of the model's columns."""
    frame = _input_frame(n=n).drop(columns=["key", "note"])
    table = pa.Table.from_pandas(frame, preserve_index=False).append_column(
        "blob", pa.array(["z" * 100_000] * n))
    pq.write_table(table, path, compression="zstd", use_dictionary=True, row_group_size=n)
    return int(pa.Table.from_pandas(frame, preserve_index=False).nbytes)


@pytest.mark.parametrize("passthrough", [[], ["blob"]])
def test_an_unused_parquet_column_is_not_decoded(tmp_path, passthrough):
    path = tmp_path / "bomb.parquet"
    model_bytes = _bomb(path)
    assert path.stat().st_size < 100_000  # ~400 MB once decoded
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(path), *passthrough],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    grown, rows, _ = (int(v) for v in out.stdout.split())
    assert rows == 4000
    # 4x what the model reads, and the allocator's slack of a process (a few MiB)
    assert grown <= 4 * model_bytes + 24 * 2**20, (grown, model_bytes)


def test_an_oversized_passthrough_cell_makes_its_row_bad(client, worker, tmp_path):
    model = _mixed_model(client, worker)
    path = tmp_path / "bomb.parquet"
    _bomb(path, n=300)
    r = _submit(client, model["id"], path.read_bytes(), "rows.parquet", passthrough="blob",
                on_error="skip", chunk_rows="100")
    job = _wait_done(client, worker, r.json()["id"])
    assert job["status"] == "succeeded", job
    assert job["result"]["n_errors"] == 300 and job["result"]["n_rows"] == 0
    assert "100000-byte value" in job["result"]["errors"][0]["reason"]


def _svmlight(X: np.ndarray, y: list[str]) -> bytes:
    lines = [" ".join([lab, *(f"{j + 1}:{v:.6f}" for j, v in enumerate(row) if v)])
             for row, lab in zip(X, y, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def test_a_model_trained_on_svmlight_scores_svmlight_rows(client, worker):
    X, y = blobs(n=80)
    labels = ["+1" if v == "pos" else "-1" for v in y]
    ds = upload(client, _svmlight(X, labels), filename="train.svm")
    job = submit(client, ds["id"], max_iter=30)
    run_jobs(worker)
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    Xn = blobs(n=30, seed=4)[0]
    lines = _svmlight(Xn, ["-1"] * 30).decode().splitlines()
    lines[4] = "-1 1:abc 2:1.0"
    lines[9] = "# a comment line"
    content = ("\n".join(lines) + "\n").encode()
    r = client.post("/batch-predictions", files={"file": ("rows.svm", content)},
                    data={"model_id": str(model_id), "chunk_rows": "8", "on_error": "skip"})
    assert r.status_code == 202, r.text
    result = _wait_done(client, worker, r.json()["id"])
    assert result["status"] == "succeeded", result
    assert [(e["row"], e["line"]) for e in result["result"]["errors"]] == [(4, 5)]
    out = pd.read_csv(io.BytesIO(
        client.get(f"/batch-predictions/{result['id']}/result").content))
    keep = [k for k in range(30) if k not in (4, 9)]
    assert out["row"].tolist() == [k if k < 9 else k - 1 for k in keep]
    good = ("\n".join(lines[k] for k in keep) + "\n").encode()
    expected = client.post("/predict/file", files={"file": ("rows.svm", good)},
                           data={"model_id": str(model_id)}).json()
    assert "predictions" in expected, expected
    np.testing.assert_allclose(out["decision_value"],
                               [p["decision_value"] for p in expected["predictions"]],
                               rtol=1e-12, atol=1e-12)


def test_a_download_whose_files_expire_midway_is_cut_off_not_ended(client, worker, engine):
    model = _mixed_model(client, worker)
    frame = _input_frame(n=200)
    r = _submit(client, model["id"], frame.to_csv(index=False).encode())
    job_id = _wait_done(client, worker, r.json()["id"])["id"]
    for fmt in ("csv", "parquet", "jsonl"):
        with Session(engine) as session:
            job = session.get(Job, job_id)
            assert job is not None and job.params
        stream = service.result_stream(engine, job, fmt)  # (the route's stream, as it runs)
        got = [next(stream), next(stream)]
        with Session(engine) as session, session.begin():
            assert session.get(Job, job_id) is not None
            saved = [(p.chunk, p.data) for p in session.query(store.BatchPart).filter_by(
                job_id=job_id, kind=store.OUTPUT)]
            store.expire(session, -1.0)  # the files expire while the download runs
        with pytest.raises(store.PartsGoneError):
            got += list(stream)
        with Session(engine) as session, session.begin():  # put them back for the next format
            for k, data in saved:
                session.add(store.BatchPart(job_id=job_id, kind=store.OUTPUT, chunk=k,
                                            n_rows=0, data=data))
