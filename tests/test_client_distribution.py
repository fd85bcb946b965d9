"""The client installs and runs on its own: a fresh venv (no system site-packages) gets only
``pip install ./msvmav_client`` (which brings httpx), and drives a live ``msvmav serve``:
upload, train, wait, predict. The venv holds no numpy, FastAPI or anything of the service."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import httpx
import pytest

from tests.live_server import ROOT, live_server

pytestmark = pytest.mark.process

SCRIPT = """
import json, sys
import msvmav_client
from msvmav_client import Client

url, wdbc = sys.argv[1], sys.argv[2]
with Client(url, timeout=60) as client:
    dataset = client.upload(wdbc)
    job = client.train(dataset["id"], test_fraction=0.2, seed=0)
    info = job.wait(timeout=120, poll=0.1)
    rows = [[0.5] * dataset["n_features"], [0.1] * dataset["n_features"]]
    answer = client.predict(job.model_id, rows)
print(json.dumps({"file": msvmav_client.__file__, "status": info["status"],
                  "model_id": job.model_id, "rows": rows, "answer": answer}))
"""


# The venv's processes see nothing of this one's: no PYTHONPATH (which may name the source
# tree, where the service's package and its egg-info live).
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _pip(python: Path, *args: str) -> str:
    return subprocess.run([str(python), "-m", "pip", *args, "--disable-pip-version-check"],
                          check=True, timeout=300, env=CLEAN_ENV, cwd=python.parents[2],
                          capture_output=True, text=True).stdout


def test_client_installs_alone_and_drives_a_live_server(tmp_path):
    env_dir = tmp_path / "client-venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    _pip(python, "install", "-q", str(ROOT / "msvmav_client"))
    installed = {p["name"].lower() for p in json.loads(_pip(python, "list", "--format=json"))}
    assert {"msvmav-client", "httpx"} <= installed
    assert not installed & {"numpy", "fastapi", "sqlalchemy", "pydantic", "msvmav"}, installed

    with live_server(tmp_path) as server:
        out = subprocess.run(
            [str(python), "-c", SCRIPT, server.url, str(ROOT / "examples" / "wdbc.arff")],
            cwd=tmp_path, env=CLEAN_ENV, check=True, capture_output=True, text=True,
            timeout=300,
        ).stdout
        result = json.loads(out)
        # the same rows through the service's HTTP API, without the client
        direct = httpx.post(f"{server.url}/predict", timeout=60,
                            json={"model_id": result["model_id"], "instances": result["rows"]})
    assert Path(result["file"]).is_relative_to(env_dir), result["file"]  # the installed copy
    assert result["status"] == "succeeded"
    assert direct.status_code == 200, direct.text
    got = [(p["label"], p["decision_value"]) for p in result["answer"]["predictions"]]
    assert got == [(p["label"], p["decision_value"]) for p in direct.json()["predictions"]]
