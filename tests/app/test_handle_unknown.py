"""handle_unknown, chosen at /train and kept in the model's encoding: an unseen category is an
error, or (ignore) a row of zeros in its one-hot block, at every door."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from tests.app.support import blobs, run_jobs, trained_model


def _model(client, worker, handle_unknown: str) -> dict:
    X, y = blobs(n=120, d=2, seed=4)
    colours = np.asarray(["red", "green", "blue"])[np.arange(120) % 3]
    frame = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "colour": colours, "y": y})
    return trained_model(client, worker, frame.to_csv(index=False).encode(),
                         handle_unknown=handle_unknown, max_iter=30)


def test_unknown_category_is_an_error_by_default(client, worker):
    model = _model(client, worker, "error")
    r = client.post("/predict", json={"model_id": model["id"],
                                      "instances": [{"x0": 1, "x1": 2, "colour": "purple"}]})
    assert r.status_code == 422 and "unknown category 'purple'" in r.text


def test_ignored_unknown_category_encodes_as_zeros(client, worker):
    model = _model(client, worker, "ignore")
    rows = [{"x0": 0.5, "x1": -0.2, "colour": "red"}, {"x0": 0.5, "x1": -0.2, "colour": "purple"}]
    r = client.post("/predict", json={"model_id": model["id"], "instances": rows})
    assert r.status_code == 200, r.text
    known, unknown = (p["decision_value"] for p in r.json()["predictions"])
    # independent: the linear decision loses exactly red's scaled one-hot term
    names = model["feature_names"]
    j = names.index("colour=red")
    coef = np.asarray(model["weights"]["coef"])[0][j]
    ranges = model["scaling_ranges"]
    lo, hi = ranges["data_min"][j], ranges["data_max"][j]
    np.testing.assert_allclose(known - unknown, coef * (1 - lo) / (hi - lo), rtol=1e-9,
                               atol=1e-12)
    # the same at the file doors
    frame = pd.DataFrame(rows)
    r = client.post("/predict/file", files={"file": ("r.csv", frame.to_csv(index=False))},
                    data={"model_id": str(model["id"])})
    assert r.status_code == 200, r.text
    assert [p["decision_value"] for p in r.json()["predictions"]] == [known, unknown]
    r = client.post("/batch-predictions", files={"file": ("r.csv", frame.to_csv(index=False))},
                    data={"model_id": str(model["id"])})
    assert r.status_code == 202, r.text
    run_jobs(worker)
    out = pd.read_csv(io.BytesIO(client.get(f"/batch-predictions/{r.json()['id']}/result")
                                 .content))
    np.testing.assert_allclose(out["decision_value"], [known, unknown], rtol=1e-12)
