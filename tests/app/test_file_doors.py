"""Every door that takes a file reads every format through the one registry's reader
(issue 43): a table model's rows as CSV, TSV, whitespace text, ARFF, Parquet and JSON Lines,
and an svmlight model's rows as svmlight, give the same numbers at POST /datasets,
/predict/file, /models/{ref}/evaluate and a batch job, against an independent computation
(the rows read by pandas / scipy / scikit-learn, scored by the estimator's own
``decision_function``). Hostile files (a truncated Parquet, a JSON Lines file with one
malformed line, an svmlight file with a bad index) are a 4xx naming the row or line at each
door; a batch job's bad line follows its ``on_error``."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from scipy.io import arff
from sklearn.datasets import load_svmlight_file
from sqlalchemy.orm import Session

from app.datasets import service as datasets
from app.datasets.orm import Dataset
from tests.app.serving_support import _reference_decisions
from tests.app.support import SHARED_DATASETS, assert_problem, run_jobs, submit, upload

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

N_TRAIN, N_SCORE = 300, 120
TABLE_FORMATS = ("csv", "tsv", "whitespace", "arff", "parquet", "jsonl")
DOORS = ("upload", "predict_file", "evaluate", "batch")
_NAMES = {"csv": "rows.csv", "tsv": "rows.tsv", "whitespace": "rows.txt", "arff": "rows.arff",
          "parquet": "rows.parquet", "jsonl": "rows.jsonl", "svmlight": "rows.svm"}


def _diabetes() -> pd.DataFrame:
    """Pima diabetes: 8 numeric features and a nominal class, read by scipy's ARFF reader."""
    data, _ = arff.loadarff(SHARED_DATASETS / "diabetes.arff")
    frame = pd.DataFrame(data)
    frame["class"] = frame["class"].str.decode("utf-8")
    return frame


def _arff(frame: pd.DataFrame) -> bytes:
    lines = ["@relation rows"]
    for name in frame.columns:
        kind = "numeric" if frame[name].dtype.kind in "fi" else (
            "{" + ",".join(sorted(frame[name].unique())) + "}")
        lines.append(f"@attribute {name} {kind}")
    lines.append("@data")
    lines += [",".join(str(v) for v in row) for row in frame.itertuples(index=False)]
    return ("\n".join(lines) + "\n").encode()


def encoded(frame: pd.DataFrame, fmt: str) -> bytes:
    """The frame written as ``fmt`` by pandas / pyarrow (not by the service)."""
    if fmt == "csv":
        return frame.to_csv(index=False).encode()
    if fmt == "tsv":
        return frame.to_csv(index=False, sep="\t").encode()
    if fmt == "whitespace":
        return frame.to_csv(index=False, sep=" ").encode()
    if fmt == "arff":
        return _arff(frame)
    if fmt == "parquet":
        out = io.BytesIO()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out)
        return out.getvalue()
    assert fmt == "jsonl"
    return frame.to_json(orient="records", lines=True).encode()


def _model_on(client, worker, content: bytes, filename: str) -> tuple[int, dict]:
    ds = upload(client, content, filename)
    job = submit(client, ds["id"], max_iter=20, calibration="none")
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    return client.get(f"/jobs/{job['id']}").json()["model_id"], ds


def _expected_labels(client, model_id: int, decisions: np.ndarray) -> list:
    """The labels the model answers for those decision values (its classes by sign: these
    models are uncalibrated binary ones)."""
    detail = client.get(f"/models/{model_id}").json()
    classes = detail["classes"]
    assert len(classes) == 2 and detail["calibration"] == "none", detail
    return [classes[1] if d > 0 else classes[0] for d in decisions]


def _answer(client, worker, app, door: str, model_id: int, content: bytes, filename: str
            ) -> tuple[np.ndarray | None, list | None, float | None]:
    """(decision values, labels, accuracy) the door answers for the file."""
    if door == "predict_file":
        r = client.post("/predict/file", data={"model_id": str(model_id)},
                        files={"file": (filename, content)})
        assert r.status_code == 200, r.text
        body = r.json()
        predictions = body["predictions"]
        return (np.asarray([p["decision_value"] for p in predictions]),
                [p["label"] for p in predictions], body["accuracy"])
    if door == "evaluate":
        r = client.post(f"/models/{model_id}/evaluate", files={"file": (filename, content)})
        assert r.status_code == 200, r.text
        metrics = r.json()["metrics"]
        assert metrics["n"] == N_SCORE
        return None, None, metrics["accuracy"]
    assert door == "batch"
    r = client.post("/batch-predictions", data={"model_id": str(model_id), "output": "parquet"},
                    files={"file": (filename, content)})
    assert r.status_code == 202, r.text
    run_jobs(worker)
    job = client.get(f"/jobs/{r.json()['id']}").json()
    assert job["status"] == "succeeded", job
    out = pq.read_table(io.BytesIO(
        client.get(f"/batch-predictions/{job['id']}/result").content)).to_pandas()
    return out["decision_value"].to_numpy(), out["label"].tolist(), None


def _stored(engine, dataset_id: int):
    with Session(engine) as session:
        return datasets.load_arrays(session, session.get(Dataset, dataset_id))


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("fmt", TABLE_FORMATS)
def test_a_table_models_rows_in_every_format_at_every_door(client, worker, app, engine,
                                                           fmt, door):
    frame = _diabetes()
    train, rows = frame.iloc[:N_TRAIN], frame.iloc[N_TRAIN:N_TRAIN + N_SCORE]
    content = encoded(rows.reset_index(drop=True), fmt)
    features = rows.drop(columns="class").to_numpy(dtype=np.float64)
    if door == "upload":  # the dataset the file gives is the rows pandas reads
        ds = upload(client, content, _NAMES[fmt])
        assert (ds["format"], ds["n_rows"], ds["n_features"]) == (
            "csv" if fmt in ("tsv", "whitespace") else fmt, N_SCORE, 8) or ds["format"] == fmt
        X, y = _stored(engine, ds["id"])[:2]
        np.testing.assert_array_equal(np.asarray(X), features)
        assert [str(v) for v in y] == rows["class"].tolist()
        return
    model_id, _ = _model_on(client, worker, encoded(train, "csv"), "train.csv")
    expected = _reference_decisions(app, model_id, features)
    labels = _expected_labels(client, model_id, expected)
    accuracy = float(np.mean(np.asarray(labels) == rows["class"].to_numpy()))
    decisions, got_labels, got_accuracy = _answer(client, worker, app, door, model_id, content,
                                                  _NAMES[fmt])
    if decisions is not None:
        np.testing.assert_allclose(decisions, expected, rtol=1e-12, atol=1e-12)
        assert got_labels == labels
    if got_accuracy is not None:
        assert got_accuracy == pytest.approx(accuracy, abs=1e-12)


def _svmlight_rows() -> tuple[bytes, bytes]:
    lines = (SHARED_DATASETS / "german.numer_scale.txt").read_bytes().splitlines(keepends=True)
    return b"".join(lines[:N_TRAIN]), b"".join(lines[N_TRAIN:N_TRAIN + N_SCORE])


@pytest.mark.parametrize("door", DOORS)
def test_an_svmlight_models_svmlight_rows_at_every_door(client, worker, app, engine, door):
    train, rows = _svmlight_rows()
    X, y = load_svmlight_file(io.BytesIO(rows), n_features=24)  # scikit-learn's reader
    if door == "upload":
        ds = upload(client, rows, "rows.svm")
        assert (ds["format"], ds["n_rows"]) == ("svmlight", N_SCORE)
        stored_X, stored_y = _stored(engine, ds["id"])[:2]
        dense = stored_X.toarray() if hasattr(stored_X, "toarray") else stored_X
        np.testing.assert_array_equal(dense, X.toarray())
        assert [float(v) for v in stored_y] == y.tolist()
        return
    model_id, _ = _model_on(client, worker, train, "train.svm")
    expected = _reference_decisions(app, model_id, X.toarray())
    labels = _expected_labels(client, model_id, expected)
    accuracy = float(np.mean(np.asarray(labels, dtype=np.float64) == y))
    decisions, got_labels, got_accuracy = _answer(client, worker, app, door, model_id, rows,
                                                  "rows.svm")
    if decisions is not None:
        np.testing.assert_allclose(decisions, expected, rtol=1e-12, atol=1e-12)
        assert [float(v) for v in got_labels] == [float(v) for v in labels]
    if got_accuracy is not None:
        assert got_accuracy == pytest.approx(accuracy, abs=1e-12)


# --- /predict/file and batch parse CSV alike ---------------------------------------------------

_CELLS = ["?", "NA", "nan", "NaN", "null", "None", "N/A", "n/a", "", " 1.5", "1.5 ", "1e3",
          "+1", "-0", "inf", "-inf", "0x10", "1,5", "'2'", '"3"', "1_000", "٣", "TRUE"]


def test_predict_file_and_batch_parse_csv_cells_alike(client, worker):
    frame = _diabetes()
    model_id, _ = _model_on(client, worker, encoded(frame.iloc[:N_TRAIN], "csv"), "train.csv")
    rows = frame.iloc[N_TRAIN:N_TRAIN + len(_CELLS)].drop(columns="class").reset_index(drop=True)
    lines = [",".join(rows.columns)]
    for k, cell in enumerate(_CELLS):
        values = [repr(float(v)) for v in rows.iloc[k]]
        values[1] = f'"{cell}"' if "," in cell else cell
        lines.append(",".join(values))
    content = ("\n".join(lines) + "\n").encode()
    r = client.post("/predict/file", data={"model_id": str(model_id), "on_error": "skip"},
                    files={"file": ("rows.csv", content)})
    assert r.status_code == 200, r.text
    body = r.json()
    file_bad = {e["row"]: e for e in body["skipped"]["errors"]}
    file_ok = {k: p["decision_value"] for k, p in zip(
        [k for k in range(len(_CELLS)) if k not in file_bad], body["predictions"], strict=True)}
    r = client.post("/batch-predictions", data={"model_id": str(model_id), "on_error": "skip",
                                                "output": "parquet"},
                    files={"file": ("rows.csv", content)})
    assert r.status_code == 202, r.text
    run_jobs(worker)
    job = client.get(f"/jobs/{r.json()['id']}").json()
    assert job["status"] == "succeeded", job
    batch_bad = {e["row"]: e for e in job["result"]["errors"]}
    out = pq.read_table(io.BytesIO(
        client.get(f"/batch-predictions/{job['id']}/result").content)).to_pandas()
    batch_ok = dict(zip(out["row"].tolist(), out["decision_value"].tolist(), strict=True))
    verdicts = {_CELLS[k]: ("bad" if k in file_bad else "ok",
                            "bad" if k in batch_bad else "ok") for k in range(len(_CELLS))}
    assert {c: v for c, v in verdicts.items() if v[0] != v[1]} == {}
    assert sorted(file_ok) == sorted(batch_ok)
    for k, value in file_ok.items():
        assert batch_ok[k] == pytest.approx(value, rel=1e-12), _CELLS[k]
    for k, e in file_bad.items():
        assert (e["line"], e["column"]) == (batch_bad[k]["line"], batch_bad[k]["column"])


def _batch_job(client, worker, model_id: int, content: bytes) -> dict:
    r = client.post("/batch-predictions", data={"model_id": str(model_id), "on_error": "skip",
                                                "output": "parquet"},
                    files={"file": ("rows.csv", content)})
    assert r.status_code == 202, r.text
    run_jobs(worker)
    return client.get(f"/jobs/{r.json()['id']}").json()


def test_a_category_spelled_as_pandas_spells_missing_is_scored_at_every_door(client, worker):
    """Regression: a batch job read "None", "NULL" and "N/A" as missing (pandas' own list),
    where an upload and /predict/file read them as the text they are (a category here), so
    the batch job made bad rows of rows /predict/file scored."""
    rng = np.random.default_rng(3)
    n = 60
    colour = np.array(["None", "NULL", "N/A", "red"])[np.arange(n) % 4]
    x = rng.normal(size=n)
    y = ((x + (colour == "None")) > 0.5).astype(int)
    train = pd.DataFrame({"x": x, "colour": colour, "y": y}).to_csv(index=False).encode()
    model_id, _ = _model_on(client, worker, train, "train.csv")
    rows = ("x,colour\n" + "".join(f"{float(v)!r},{c}\n" for v, c in zip(x[:8], colour[:8],
                                                                  strict=True))).encode()
    r = client.post("/predict/file", data={"model_id": str(model_id)},
                    files={"file": ("rows.csv", rows)})
    assert r.status_code == 200, r.text
    expected = [p["decision_value"] for p in r.json()["predictions"]]
    job = _batch_job(client, worker, model_id, rows)
    assert job["status"] == "succeeded" and job["result"]["errors"] == [], job
    out = pq.read_table(io.BytesIO(
        client.get(f"/batch-predictions/{job['id']}/result").content)).to_pandas()
    assert out["decision_value"].tolist() == pytest.approx(expected, rel=1e-12)


def test_a_header_naming_a_column_twice_is_refused_at_predict_file_and_batch(client, worker):
    """Regression: a batch job took pandas' reading of a header ("plas", "plas.1"), scoring
    the first of two columns named alike, which /predict/file refuses (422 naming it)."""
    frame = _diabetes()
    model_id, _ = _model_on(client, worker, encoded(frame.iloc[:N_TRAIN], "csv"), "train.csv")
    rows = frame.iloc[N_TRAIN:N_TRAIN + 5].drop(columns="class")
    text = rows.assign(extra=rows["plas"]).to_csv(index=False)
    content = text.replace(",extra", ",plas", 1).encode()
    r = client.post("/predict/file", data={"model_id": str(model_id)},
                    files={"file": ("rows.csv", content)})
    assert "'plas' twice" in assert_problem(r, 422)["detail"]
    r = client.post("/batch-predictions", data={"model_id": str(model_id)},
                    files={"file": ("rows.csv", content)})
    assert "'plas' twice" in assert_problem(r, 422)["detail"]


def test_a_trailing_delimiter_on_a_line_is_tolerated_at_predict_file_and_batch(client, worker):
    """Regression: a batch job made a bad line ("the line has 10 fields; the header has 9")
    of a row ending in a delimiter, which an upload and /predict/file read past."""
    frame = _diabetes()
    model_id, _ = _model_on(client, worker, encoded(frame.iloc[:N_TRAIN], "csv"), "train.csv")
    lines = encoded(frame.iloc[N_TRAIN:N_TRAIN + 6].drop(columns="class"), "csv").decode()
    lines = lines.splitlines()
    lines[2] += ","  # the second row
    content = ("\n".join(lines) + "\n").encode()
    r = client.post("/predict/file", data={"model_id": str(model_id)},
                    files={"file": ("rows.csv", content)})
    assert r.status_code == 200, r.text
    expected = [p["decision_value"] for p in r.json()["predictions"]]
    job = _batch_job(client, worker, model_id, content)
    assert job["status"] == "succeeded" and job["result"]["errors"] == [], job
    out = pq.read_table(io.BytesIO(
        client.get(f"/batch-predictions/{job['id']}/result").content)).to_pandas()
    assert out["decision_value"].tolist() == pytest.approx(expected, rel=1e-12)


# --- hostile files at every door --------------------------------------------------------------

def _hostile(kind: str) -> tuple[bytes, str, str]:
    """(content, file name, what the refusal names) of a hostile file."""
    frame = _diabetes().iloc[N_TRAIN:N_TRAIN + 40].reset_index(drop=True)
    if kind == "truncated parquet":
        content = encoded(frame, "parquet")
        return content[: len(content) // 2], "rows.parquet", "parquet"
    if kind == "jsonl with a malformed line":
        lines = encoded(frame, "jsonl").decode().splitlines()
        lines[6] = lines[6][:-5]  # line 7 cut short: not JSON
        return ("\n".join(lines) + "\n").encode(), "rows.jsonl", "line 7"
    assert kind == "svmlight with a bad index"
    lines = _svmlight_rows()[1].decode().splitlines()[:40]
    lines[4] = lines[4].replace(" 1:", " x:", 1)  # line 5: an index that is no number
    return ("\n".join(lines) + "\n").encode(), "rows.svm", "line 5"


HOSTILE = ("truncated parquet", "jsonl with a malformed line", "svmlight with a bad index")


@pytest.mark.parametrize("door", ("upload", "predict_file", "evaluate"))
@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_file_is_a_4xx_naming_where_at_every_door(client, worker, kind, door):
    content, filename, named = _hostile(kind)
    if door == "upload":
        body = assert_problem(client.post("/datasets", files={"file": (filename, content)}),
                              422)
        assert named in body["detail"].lower() or named in str(body.get("errors")).lower(), body
        return
    train = _svmlight_rows()[0] if kind.startswith("svmlight") else encoded(
        _diabetes().iloc[:N_TRAIN], "csv")
    model_id, _ = _model_on(client, worker, train, "train.svm" if kind.startswith("svm")
                            else "train.csv")
    if door == "predict_file":
        r = client.post("/predict/file", data={"model_id": str(model_id)},
                        files={"file": (filename, content)})
    else:
        r = client.post(f"/models/{model_id}/evaluate", files={"file": (filename, content)})
    body = assert_problem(r, 422)
    assert named in body["detail"].lower() or named in str(body.get("errors")).lower(), body


@pytest.mark.parametrize("on_error", ("fail", "skip"))
@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_file_to_a_batch_job_names_its_line(client, worker, kind, on_error):
    content, filename, named = _hostile(kind)
    train = _svmlight_rows()[0] if kind.startswith("svmlight") else encoded(
        _diabetes().iloc[:N_TRAIN], "csv")
    model_id, _ = _model_on(client, worker, train, "train.svm" if kind.startswith("svm")
                            else "train.csv")
    r = client.post("/batch-predictions", data={"model_id": str(model_id), "on_error": on_error},
                    files={"file": (filename, content)})
    if kind == "truncated parquet":  # no row can be read: refused at submission
        body = assert_problem(r, 422)
        assert "parquet" in body["detail"].lower(), body
        return
    assert r.status_code == 202, r.text
    run_jobs(worker)
    job = client.get(f"/jobs/{r.json()['id']}").json()
    if on_error == "fail":
        assert job["status"] == "failed", job
        assert job["error"].startswith(named), job["error"]
        return
    assert job["status"] == "succeeded", job
    (error,) = job["result"]["errors"]
    assert f"line {error['line']}" == named, error
    assert job["result"]["n_rows"] == 39


# --- a Parquet file has rows, not lines ---------------------------------------------------------

def test_a_parquet_files_bad_cell_is_named_by_its_row_at_every_door(client, worker):
    """Regression: a Parquet file's bad or missing cell was said to be on "line N"."""
    frame = _diabetes()
    model_id, _ = _model_on(client, worker, encoded(frame.iloc[:N_TRAIN], "csv"), "train.csv")
    rows = frame.iloc[N_TRAIN:N_TRAIN + 10].reset_index(drop=True)
    text = rows.assign(plas=rows["plas"].astype(str))
    text.loc[3, "plas"] = "oops"  # the 4th row
    missing = rows.copy()
    missing.loc[4, "plas"] = np.nan  # the 5th row
    for bad, row, what in ((text, 4, "'oops' is not a number"), (missing, 5, "missing")):
        content = encoded(bad, "parquet")
        for r in (client.post("/predict/file", data={"model_id": str(model_id)},
                              files={"file": ("rows.parquet", content)}),
                  client.post(f"/models/{model_id}/evaluate",
                              files={"file": ("rows.parquet", content)})):
            body = assert_problem(r, 422)
            assert f"row {row}" in body["detail"].lower() and "line" not in body["detail"], body
            assert (body["row"], body["column"]) == (row, "plas") and what in body["detail"]
        r = client.post("/batch-predictions", data={"model_id": str(model_id)},
                        files={"file": ("rows.parquet", content)})
        run_jobs(worker)
        job = client.get(f"/jobs/{r.json()['id']}").json()
        assert job["status"] == "failed" and job["error"].startswith(f"row {row}, column 'plas'")
    body = assert_problem(client.post("/datasets", files={"file": (
        "rows.parquet", encoded(missing, "parquet"))}), 422)
    assert "row 5 ('plas')" in body["detail"] and "null or NaN" in body["detail"], body
