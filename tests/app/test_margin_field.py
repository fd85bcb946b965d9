"""Each answer's ``margin`` (the predicted label's margin y·f(x); multi-class f_label − max of
the others) is the estimator's own ``margin_vector`` for the labels answered, at every door
that answers predictions: /predict, /predict/file, MLflow's invocations, the Open Inference
Protocol's infer and a batch job."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from app.serving.acquire import cold
from tests.app.support import blobs, run_jobs, trained_model

pq = pytest.importorskip("pyarrow.parquet")


def _library_margins(app, model_id: int, X: np.ndarray, labels: list) -> np.ndarray:
    """The estimator's own margins (solver: y·f(x), multi-class f_y − max_{j≠y} f_j) of the
    rows for the labels the door answered."""
    with app.state.session_factory() as session:
        loaded = cold(session, model_id)
    classes = loaded.estimator.classes_
    y = np.asarray(labels, dtype=classes.dtype)
    return np.asarray(loaded.estimator.margin_vector(loaded.transform(X), y))


def _door_answers(client, worker, model_id: int, frame: pd.DataFrame) -> dict[str, tuple]:
    """door -> (labels, margins)."""
    out = {}
    records = frame.to_dict("records")
    body = client.post("/predict", json={"model_id": model_id, "instances": records}).json()
    out["predict"] = body["predictions"]
    r = client.post("/predict/file", data={"model_id": str(model_id)},
                    files={"file": ("rows.csv", frame.to_csv(index=False).encode())})
    assert r.status_code == 200, r.text
    out["predict_file"] = r.json()["predictions"]
    r = client.post(f"/models/{model_id}/invocations",
                    json={"dataframe_records": records})
    assert r.status_code == 200, r.text
    out["invocations"] = r.json()["predictions"]
    answers = {k: ([p["label"] for p in v], [p["margin"] for p in v]) for k, v in out.items()}
    tensor = {"name": "input", "datatype": "FP64", "shape": list(frame.shape),
              "data": frame.to_numpy().reshape(-1).tolist()}
    r = client.post(f"/v2/models/{model_id}/infer", json={"inputs": [tensor]})
    assert r.status_code == 200, r.text
    tensors = {t["name"]: t for t in r.json()["outputs"]}
    assert tensors["margin"]["shape"] == [len(frame)] and tensors["margin"]["datatype"] == "FP64"
    answers["v2"] = (tensors["label"]["data"], tensors["margin"]["data"])
    r = client.post("/batch-predictions", data={"model_id": str(model_id), "output": "parquet"},
                    files={"file": ("rows.csv", frame.to_csv(index=False).encode())})
    assert r.status_code == 202, r.text
    run_jobs(worker)
    result = pq.read_table(io.BytesIO(
        client.get(f"/batch-predictions/{r.json()['id']}/result").content)).to_pandas()
    answers["batch"] = (result["label"].tolist(), result["margin"].tolist())
    return answers


@pytest.mark.parametrize("classes", [(1, 2), (1, 2, 3)])
def test_every_door_answers_the_labels_margin(client, worker, app, classes):
    X, y = blobs(n=120, d=3, classes=classes, seed=5, shift=2.0)
    names = ["x0", "x1", "x2"]
    train = pd.DataFrame(X, columns=names).assign(y=y)
    model = trained_model(client, worker, train.to_csv(index=False).encode())
    rows, _ = blobs(n=40, d=3, classes=classes, seed=9, shift=2.0)
    frame = pd.DataFrame(rows, columns=names)
    answers = _door_answers(client, worker, model["id"], frame)
    labels = answers["predict"][0]
    expected = _library_margins(app, model["id"], rows, labels)
    assert (expected > 0).any()  # not vacuous: real margins, on both sides of zero or not
    for door, (got_labels, margins) in answers.items():
        assert [int(v) for v in got_labels] == [int(v) for v in labels], door
        np.testing.assert_allclose(margins, expected, rtol=1e-12, atol=1e-12, err_msg=door)
