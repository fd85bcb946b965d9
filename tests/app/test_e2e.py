"""End to end: ``msvmav serve`` as a real process, driven over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.app.support import SHARED_DATASETS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "MSVMAV_DATABASE_URL": f"sqlite:///{tmp_path / 'e2e.db'}",
        "MSVMAV_WORKER_POLL_INTERVAL": "0.1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(proc.stdout.read())
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server did not become ready")
            time.sleep(0.2)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_serve_upload_train_poll_predict_wdbc(server):
    path = SHARED_DATASETS / "wdbc.arff"
    if not path.exists():
        pytest.skip(f"{path} not available")
    base, proc = server
    with httpx.Client(base_url=base, timeout=30) as http:
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

        deadline = time.monotonic() + 120
        while (job := http.get(location).json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
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

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
