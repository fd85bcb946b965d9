"""Datasets by reference (POST /datasets/references, issue 32): the path rules refuse every
escape from MSVMAV_DATA_ROOTS (403 naming the rule, 422 for what is no location), and a
registered Parquet dataset behaves like the same rows uploaded as CSV: the same encoding,
classes and, fitted locally, the same model."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest
from sqlalchemy.orm import Session

from app.batch import partitions
from app.core.config import Settings
from app.core.problems import Problem
from app.datasets import locations
from app.datasets.orm import Dataset
from app.serving.acquire import cold
from tests.app.reference_support import (  # noqa: F401  (fixtures: the app's data root)
    frame,
    root_fixture,
    settings_fixture,
    write_parts,
)
from tests.app.support import assert_problem, run_jobs, submit, upload


def refused(text: str, roots: list[str], status: int = 403) -> str:
    with pytest.raises(Problem) as info:
        locations.files_of(text, locations.roots_of(roots), ["body", "uri"])
    assert info.value.status == status, (text, info.value.detail)
    return info.value.detail


# --- the path rules ------------------------------------------------------------------------


def test_every_escape_from_the_roots_is_refused_naming_its_rule(tmp_path: Path):
    root, outside = tmp_path / "data", tmp_path / "secret"
    write_parts(frame(), root / "ok")
    write_parts(frame(), outside)
    (tmp_path / "data2").mkdir()
    write_parts(frame(), tmp_path / "data2")
    roots = [str(root)]
    assert len(locations.files_of(str(root / "ok"), locations.roots_of(roots), ["uri"])) == 3
    assert "'..'" in refused(f"{root}/../secret", roots)
    assert "'..'" in refused(f"{root}/ok/../../secret/part-0.parquet", roots)
    assert "not under a configured root" in refused(str(outside), roots)
    assert "not under a configured root" in refused(str(tmp_path / "data2"), roots)  # a sibling
    assert "not under a configured root" in refused("/etc/passwd", roots)
    assert "not under a configured root" in refused(f"file://{outside}", roots)
    assert "this machine only" in refused(f"file://evil.example{root}/ok", roots)
    assert "scheme and host" in refused("http://169.254.169.254/latest/meta-data", roots)
    assert "scheme and host" in refused("s3://other-bucket/x.parquet", ["s3://team/data"])
    assert "not under a configured root" in refused("s3://team/data2/x", ["s3://team/data"])
    for malformed in ("relative/path", "ok/part-0.parquet", "ftp://host/x", f"{root}%2F..",
                      "s3://team@evil/data/x", "s3://team/data/x?versionId=1", ""):
        refused(malformed, roots + ["s3://team/data"], status=422)


def test_a_symbolic_link_out_of_the_root_is_refused_for_every_matched_file(tmp_path: Path):
    root, outside = tmp_path / "data", tmp_path / "secret"
    inside = write_parts(frame(), root / "ok")
    secret = write_parts(frame(), outside)
    roots = [str(root)]
    os.symlink(secret[0], root / "ok" / "part-9.parquet")  # a file link among good files
    for uri in (str(root / "ok"), str(root / "ok" / "*.parquet"), str(root / "**"),
                str(root / "ok" / "part-9.parquet")):
        assert "outside the configured roots" in refused(uri, roots), uri
    os.unlink(root / "ok" / "part-9.parquet")
    os.symlink(outside, root / "linked")  # a directory link
    assert "outside the configured roots" in refused(str(root / "linked"), roots)
    assert "outside the configured roots" in refused(str(root / "linked" / "part-0.parquet"),
                                                     roots)
    os.symlink(inside[0], root / "alias.parquet")  # a link that stays inside is fine
    assert locations.files_of(str(root / "alias.parquet"), locations.roots_of(roots), ["uri"])


def test_no_roots_configured_refuses_every_location(tmp_path: Path):
    write_parts(frame(), tmp_path / "d")
    assert "MSVMAV_DATA_ROOTS is unset" in refused(str(tmp_path / "d"), [])


def test_an_fsspec_url_is_listed_and_each_listed_file_checked():
    fs = fsspec.filesystem("memory")
    df = frame()
    for k in range(2):
        with fs.open(f"/team/data/part-{k}.parquet", "wb") as f:
            df.iloc[k * 60:(k + 1) * 60].to_parquet(f, index=False)
    roots = locations.roots_of(["memory://team/data"])
    files = locations.files_of("memory://team/data/", roots, ["uri"])
    assert files == ["memory://team/data/part-0.parquet", "memory://team/data/part-1.parquet"]
    refused("memory://team/other/", ["memory://team/data"])
    # a scheme whose filesystem is not installed (or a bucket that cannot be listed): a 422
    assert "cannot be" in refused("hdfs://namenode/data/x.parquet", ["hdfs://namenode/data"],
                                  status=422)


# --- registering, and behaving like an upload ------------------------------------------------


def test_a_dataset_by_reference_is_encoded_and_fits_like_the_same_rows_uploaded(
        client, worker, root: Path):
    df = frame()
    write_parts(df, root / "clicks")
    r = client.post("/datasets/references", json={"uri": str(root / "clicks"), "label": "label",
                                                  "drop": ["id"], "name": "clicks"})
    assert r.status_code == 201, r.text
    ref = r.json()
    assert r.headers["Location"] == f"/datasets/{ref['id']}"
    assert ref["format"] == "parquet" and ref["n_rows"] == 120
    assert [f["n_rows"] for f in ref["reference"]["files"]] == [40, 40, 40]
    assert ref["reference"]["uri"] == str(root / "clicks")
    assert client.get(f"/datasets/{ref['id']}").json()["reference"] == ref["reference"]
    csv = df.to_csv(index=False, float_format="%.17g").encode()
    up = upload(client, csv, label="label", drop="id")
    assert up["reference"] is None
    assert ref["feature_names"] == up["feature_names"] == [
        "x1", "colour=blue", "colour=green", "colour=red", "x2"]
    assert ref["encoding"]["columns"] == up["encoding"]["columns"]
    assert (ref["classes"], ref["class_counts"]) == (up["classes"], up["class_counts"])
    models = []
    for dataset_id in (ref["id"], up["id"]):
        job = submit(client, dataset_id, max_iter=40, test_fraction=0.25)
        assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
        models.append(client.get(f"/jobs/{job['id']}").json()["model_id"])
    rows = df.drop(columns=["label"]).head(10).to_dict("records")
    answers = [client.post("/predict", json={"model_id": m, "instances": rows}).json()
               for m in models]
    assert all("predictions" in ans for ans in answers), answers
    a, b = ([p["decision_value"] for p in ans["predictions"]] for ans in answers)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    profile = client.get(f"/datasets/{ref['id']}/profile")
    assert profile.status_code == 200 and profile.json()["n_rows"] == 120


def test_registering_refuses_escapes_and_bad_files_through_the_api(client, root: Path,
                                                                   tmp_path: Path):
    write_parts(frame(), tmp_path / "elsewhere")
    body = assert_problem(client.post("/datasets/references", json={
        "uri": str(tmp_path / "elsewhere")}), 403)
    assert "not under a configured root" in body["detail"] and body["errors"][0]["field"] == "uri"
    assert_problem(client.post("/datasets/references", json={"uri": f"{root}/../elsewhere"}),
                   403)
    assert_problem(client.post("/datasets/references", json={"uri": "data/x"}), 422, "uri")
    assert_problem(client.post("/datasets/references", json={"uri": str(root / "none")}), 422,
                   "uri")
    (root / "bad.parquet").write_bytes(b"not parquet at all")
    assert_problem(client.post("/datasets/references", json={"uri": str(root / "bad.parquet")}),
                   422, "uri")
    write_parts(frame(), root / "d")
    assert_problem(client.post("/datasets/references", json={"uri": str(root / "d"),
                                                             "label": "nope"}), 422, "label")
    assert_problem(client.post("/datasets/references", json={"uri": str(root / "d"),
                                                             "drop": ["nope"]}), 422, "drop")


@pytest.mark.parametrize(("name", "fmt"), [("rows.jsonl", "jsonl"), ("rows.csv", "csv"),
                                           ("rows.svm", "svmlight"), ("rows.dat", "jsonl")])
def test_a_file_of_another_format_is_a_422_saying_what_it_reads_as(client, root: Path, name,
                                                                   fmt):
    """A dataset by reference is Parquet files: a JSON Lines, CSV or svmlight file named is
    refused naming ``uri``, with what the format registry reads it as (by extension, else by
    content: rows.dat holds JSON Lines) and where such a file goes."""
    df = frame(n=6)
    text = {"jsonl": df.to_json(orient="records", lines=True),
            "csv": df.to_csv(index=False), "svmlight": "1 1:0.5 2:3\n-1 1:0.25\n"}[fmt]
    (root / name).write_text(text)
    body = assert_problem(client.post("/datasets/references", json={
        "uri": f"{root}/rows.*", "label": "label"}), 422, "uri")
    assert f"it reads as {fmt}" in body["detail"] and "POST /datasets" in body["detail"], body


# --- batch scoring where the partitions lie ---------------------------------------------------


def _registered_and_trained(client, worker, root: Path) -> tuple[dict, int, pd.DataFrame]:
    df = frame()
    write_parts(df, root / "clicks")
    r = client.post("/datasets/references", json={"uri": str(root / "clicks"), "label": "label"})
    assert r.status_code == 201, r.text
    job = submit(client, r.json()["id"], max_iter=40)
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    return r.json(), client.get(f"/jobs/{job['id']}").json()["model_id"], df


def test_batch_scoring_writes_each_partition_once_beside_the_dataset(client, worker, engine,
                                                                     root: Path):
    dataset, model_id, df = _registered_and_trained(client, worker, root)
    form = {"dataset_id": dataset["id"], "model_id": model_id, "output": "parquet",
            "id_column": "id", "passthrough": "colour"}
    r = client.post("/batch-predictions", data=form)
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{r.json()['id']}").json()
    job = client.get(f"/jobs/{r.json()['id']}").json()
    out = Path(job["result"]["output_uri"])
    assert out == root / "clicks" / f"_scores-{job['id']}"
    assert sorted(p.name for p in out.iterdir()) == [f"part-{k:05d}.parquet" for k in range(3)]
    assert job["result"]["n_rows"] == 120 and job["result"]["written"] == 3
    scored = pd.concat([pd.read_parquet(out / f"part-{k:05d}.parquet") for k in range(3)])
    assert scored["id"].tolist() == list(range(120))
    assert scored["colour"].tolist() == df["colour"].tolist()
    rows = df.drop(columns=["label"]).to_dict("records")
    expected = client.post("/predict", json={"model_id": model_id, "instances": rows}).json()
    np.testing.assert_allclose(scored["decision_value"],
                               [p["decision_value"] for p in expected["predictions"]],
                               rtol=1e-12)
    # a retried partition (the same task again, or a resumed job) writes nothing twice
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    (out / "part-00001.parquet").unlink()
    files = [f["path"] for f in dataset["reference"]["files"]]
    with Session(engine) as session:
        loaded = cold(session, model_id)
        encoding = session.get(Dataset, dataset["id"]).encoding
    task = partial(partitions.score_partition, loaded=loaded, encoding=encoding,
                   columns=job["params"]["columns"], id_column="id", passthrough=["colour"],
                   out_dir=str(out))
    again = partitions.run_partitions(files, [0, 40, 80], task, None, lambda d, n: None)
    assert [p["written"] for p in again] == [False, True, False]
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name != "part-00001.parquet"
            } == {k: v for k, v in stamps.items() if k != "part-00001.parquet"}
    assert sorted(p.name for p in out.iterdir()) == sorted(stamps)  # no temporary file left
    assert pd.read_parquet(out / "part-00001.parquet")["id"].tolist() == list(range(40, 80))
    # the output directory is not part of the dataset if the directory is registered again
    r = client.post("/datasets/references", json={"uri": str(root / "clicks"), "label": "label"})
    assert len(r.json()["reference"]["files"]) == 3


def test_batch_output_root_and_its_rules(client, worker, root: Path, settings: Settings,
                                         tmp_path: Path):
    dataset, model_id, _ = _registered_and_trained(client, worker, root)
    form = {"dataset_id": dataset["id"], "model_id": model_id}
    r = client.post("/batch-predictions", data={**form, "output": "csv"})
    assert_problem(r, 422, "output")
    settings.output_root = str(tmp_path / "scores")
    r = client.post("/batch-predictions", data={**form, "output": "parquet"})
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    job = client.get(f"/jobs/{r.json()['id']}").json()
    assert job["result"]["output_uri"] == str(
        tmp_path / "scores" / f"dataset-{dataset['id']}" / f"_scores-{job['id']}")
    assert_problem(client.get(f"/batch-predictions/{job['id']}/result"), 409)


def test_profile_reads_the_first_rows_and_delete_keeps_the_files(client, root: Path,
                                                                 monkeypatch):
    from app.datasets import profile

    paths = write_parts(frame(), root / "d")
    ref = client.post("/datasets/references", json={"uri": str(root / "d"), "label": "label"})
    assert ref.status_code == 201, ref.text
    dataset_id = ref.json()["id"]
    monkeypatch.setattr(profile, "PROFILE_ROWS", 50)
    body = client.get(f"/datasets/{dataset_id}/profile").json()
    assert (body["rows_profiled"], body["n_rows"]) == (50, 120)
    assert body["preview"]["labels"] == frame()["label"].head(10).tolist()
    assert client.delete(f"/datasets/{dataset_id}").status_code == 204
    assert client.get(f"/datasets/{dataset_id}").status_code == 404
    assert all(p.exists() for p in paths)  # the rows were never the service's to delete
