"""/metrics: per-model prediction counters and decision histogram (counted from the answers
here), and the process's memory, CPU and open fds."""

from __future__ import annotations

import re

import numpy as np
import pytest

from app.monitoring import log as prediction_log
from app.monitoring.metrics import DECISION_BUCKETS
from tests.app.support import blobs, trained_model


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_prediction_metrics_per_model(client, worker, app):
    first = trained_model(client, worker)
    second = trained_model(client, worker, alpha=4.0)
    X, _ = blobs(n=30, seed=4)
    X[:5, 0] = 1e6  # clipped
    decisions, clipped = [], 0
    for _ in range(2):
        r = client.post("/predict", json={"model_id": first["id"], "instances": X.tolist()})
        decisions += [p["decision_value"] for p in r.json()["predictions"]]
        clipped += sum(p["clipped"] for p in r.json()["predictions"])
    client.post("/predict", json={"model_id": second["id"], "instances": X[:3].tolist()})
    prediction_log.writer(app.state.runtime).flush()
    got = _samples(client.get("/metrics").text)
    m = f'model="{first["id"]}"'
    assert got[f"msvmav_predictions_total{{{m}}}"] == 60
    assert got[f'msvmav_predictions_total{{model="{second["id"]}"}}'] == 3
    assert got[f"msvmav_prediction_clipped_total{{{m}}}"] == clipped >= 10
    d = np.array(decisions)
    for bound in DECISION_BUCKETS:
        key = f'msvmav_prediction_decision_bucket{{{m},le="{bound}"}}'
        assert got[key] == np.count_nonzero(d <= bound), bound
    assert got[f'msvmav_prediction_decision_bucket{{{m},le="+Inf"}}'] == 60
    assert got[f"msvmav_prediction_decision_count{{{m}}}"] == 60
    assert got[f"msvmav_prediction_decision_sum{{{m}}}"] == pytest.approx(d.sum())
    assert got["process_resident_memory_bytes"] > 1e6
    assert got["process_cpu_seconds_total"] > 0
    assert got["process_open_fds"] >= 3
    assert re.search(r"^# TYPE msvmav_prediction_decision histogram$", client.get("/metrics").text,
                     re.M)  # fmt: skip
