"""The monitoring report's second estimate (ATC), its reliability verdict, the margin-density
drift and the warnings (issue 47), on a real data set the service was never tuned on
(diabetes.arff, /work/shared/datasets): an unshifted window with full feedback, and a window
whose one input was inflated upstream (x 1e4), which CBPE alone estimated confidently."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.io import arff

from tests.app.support import run_jobs

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "diabetes.arff"


@pytest.fixture(scope="module")
def diabetes() -> pd.DataFrame:
    if not DATA.exists():
        pytest.skip(f"{DATA} is not here")
    data, _ = arff.loadarff(DATA)
    frame = pd.DataFrame(data)
    frame["class"] = frame["class"].str.decode("ascii")
    return frame.sample(frac=1.0, random_state=7).reset_index(drop=True)


def _window(client, model_id: int, rows: pd.DataFrame, tag: str) -> list[dict]:
    features = rows.drop(columns=["class"])
    ids = [f"{tag}{i}" for i in range(len(rows))]
    r = client.post("/predict", json={"model_id": model_id, "ids": ids,
                                      "instances": features.to_dict("records")})
    assert r.status_code == 200, r.text
    fb = client.post("/feedback", json={"model_id": model_id, "ids": ids,
                                        "labels": rows["class"].tolist()})
    assert fb.status_code == 200 and fb.json()["matched"] == len(rows), fb.text
    return r.json()["predictions"]


def _report(client, model_id: int, since: datetime | None = None) -> dict:
    params = {} if since is None else {"since": since.isoformat()}
    r = client.get(f"/models/{model_id}/monitoring", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_an_inflated_input_is_marked_unreliable_and_the_control_is_not(client, worker,
                                                                       diabetes):
    train, live = diabetes.iloc[:500], diabetes.iloc[500:]
    up = client.post("/datasets", files={"file": ("diabetes.csv",
                                                  train.to_csv(index=False).encode())},
                     data={"label": "class"})
    assert up.status_code == 201, up.text
    job = client.post("/train", json={"dataset_id": up.json()["id"], "test_fraction": 0.3,
                                      "calibration": "sigmoid", "seed": 0})
    assert job.status_code == 202, job.text
    assert run_jobs(worker) == ["succeeded"]
    model_id = client.get(f"/jobs/{job.json()['id']}").json()["model_id"]

    predictions = _window(client, model_id, live, "control-")
    control = _report(client, model_id)
    est = control["performance_estimate"]
    realised = np.mean([p["label"] == y for p, y in zip(predictions, live["class"],
                                                         strict=True)])
    assert est["realised_accuracy"] == pytest.approx(realised)
    assert est["gap"] == pytest.approx(realised - est["estimate"])
    # ATC by hand: the share of rows whose predicted-class probability exceeds the threshold
    confidence = np.array([p["probability"] for p in predictions])
    atc = est["atc"]
    assert atc["reference"] == "hold-out" and atc["n"] == len(live)
    assert atc["estimate"] == pytest.approx(np.mean(confidence > atc["threshold"]))
    assert atc["low"] <= atc["estimate"] <= atc["high"]
    assert est["reliability"]["verdict"] in ("reliable", "unreliable")
    if est["reliability"]["verdict"] == "reliable":
        assert abs(est["estimate"] - realised) <= 0.05
    assert control["margin_density"]["method"] == "md3"
    assert not any(w["code"] == "clipped_inputs" for w in control["warnings"])

    since = datetime.now(UTC)  # the control's rows are written: its report waited for them
    inflated = live.assign(plas=live["plas"] * 1e4)
    shifted = _window(client, model_id, inflated, "inflated-")
    report = _report(client, model_id, since)
    est = report["performance_estimate"]
    realised = np.mean([p["label"] == y for p, y in zip(shifted, inflated["class"],
                                                         strict=True)])
    assert est["n"] == len(live) and est["realised_accuracy"] == pytest.approx(realised)
    assert est["reliability"]["verdict"] == "unreliable", est
    reasons = " ".join(est["reliability"]["reasons"])
    assert "outside the training range" in reasons
    codes = {w["code"] for w in report["warnings"]}
    assert {"clipped_inputs", "unreliable_estimate"} <= codes, report["warnings"]


def test_the_report_says_none_without_probabilities(client, worker, diabetes):
    csv = io.BytesIO(diabetes.iloc[:200].to_csv(index=False).encode())
    up = client.post("/datasets", files={"file": ("d.csv", csv.getvalue())},
                     data={"label": "class"})
    job = client.post("/train", json={"dataset_id": up.json()["id"], "calibration": "none"})
    assert job.status_code == 202, job.text
    assert run_jobs(worker) == ["succeeded"]
    model_id = client.get(f"/jobs/{job.json()['id']}").json()["model_id"]
    _window(client, model_id, diabetes.iloc[200:260], "n-")
    report = _report(client, model_id)
    assert report["performance_estimate"] is None
    assert isinstance(report["warnings"], list) and report["margin_density"] is not None
