"""End to end: ``msvmav serve`` as a real process, driven over HTTP."""

from __future__ import annotations

import signal

import httpx
import pytest

from tests.app.support import wait_for
from tests.live_server import ROOT, live_server


@pytest.fixture
def server(tmp_path):
    with live_server(tmp_path) as server:
        yield server


def test_serve_upload_train_poll_predict_wdbc(server):
    path = ROOT / "examples" / "wdbc.arff"
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.post(
            "/datasets", files={"file": ("wdbc.arff", path.read_bytes())}, data={"label": "Class"}
        )
        assert r.status_code == 201, r.text
        ds = r.json()
        assert (ds["n_rows"], ds["n_features"]) == (569, 30)

        r = http.post(
            "/train",
            json={
                "dataset_id": ds["id"],
                "kernel": "linear",
                "alpha": 16,
                "beta": 0.25,
                "test_fraction": 0.2,
                "seed": 0,
            },
        )
        assert r.status_code == 202, r.text
        location = r.headers["location"]

        job = wait_for(
            lambda: (j := http.get(location).json())["status"] not in ("queued", "running") and j,
            timeout=120,
            interval=0.2,
        )
        assert job["status"] == "succeeded", job

        model = http.get(f"/models/{job['model_id']}").json()
        assert model["n_test"] == 114
        assert model["holdout_accuracy"] >= 0.95, model["holdout_accuracy"]

        r = http.post(
            "/predict/file",
            files={"file": ("wdbc.arff", path.read_bytes())},
            data={"model_id": str(model["id"]), "label": "Class"},
        )
        assert r.status_code == 200, r.text
        batch = r.json()
        assert batch["n"] == 569 and batch["accuracy"] >= 0.95
        assert batch["margins"]["n"] == 569

        row = {name: 1.0 for name in ds["feature_names"]}
        r = http.post("/predict", json={"model_id": model["id"], "instances": [row]})
        assert r.status_code == 200, r.text
        assert r.json()["predictions"][0]["label"] in model["classes"]

        margins = http.get(f"/models/{model['id']}/margins").json()
        assert margins["n"] == 455 and margins["statistics"]["histogram"]["counts"]
        assert "msvmav_jobs" in http.get("/metrics").text

    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
