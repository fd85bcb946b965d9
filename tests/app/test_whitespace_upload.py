"""Whitespace-separated text (UCI's .dat files) at upload, by option or sniffed, and at
/predict/file, read as the same table as its CSV spelling."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app.support import blobs, run_jobs, submit, to_csv, upload


def _spaced(X: np.ndarray, y, header: bool = True) -> bytes:
    lines = ["  x0   x1  x2  y"] if header else []
    lines += ["  ".join(f"{v:.6f}" for v in row) + f"   {lab}" for row, lab in zip(X, y,
                                                                                     strict=True)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("form", [{"delimiter": "whitespace"}, {"delimiter": " "}, {}])
def test_whitespace_separated_upload_reads_as_its_csv(client, form):
    X, y = blobs(n=60)
    as_csv = upload(client, to_csv(X, y))
    spaced = upload(client, _spaced(X, y), "data.dat", **form)
    for key in ("n_rows", "n_features", "feature_names", "classes", "class_counts"):
        assert spaced[key] == as_csv[key], key


def test_headerless_whitespace_file_and_predict_file(client, worker):
    X, y = blobs(n=60)
    ds = upload(client, _spaced(X, y, header=False), "data.dat")
    assert ds["n_features"] == 3 and ds["classes"] == ["neg", "pos"]
    job = submit(client, ds["id"], max_iter=20)
    run_jobs(worker)
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    r = client.post("/predict/file", files={"file": ("new.dat", _spaced(X, y, header=False))},
                    data={"model_id": str(model_id)})
    assert r.status_code == 200, r.text
    expected = client.post("/predict", json={"model_id": model_id,
                                             "instances": X.round(6).tolist()}).json()
    assert [p["decision_value"] for p in r.json()["predictions"]] == [
        p["decision_value"] for p in expected["predictions"]]
