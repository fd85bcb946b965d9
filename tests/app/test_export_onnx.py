"""GET /models/{id}/export?format=onnx: onnxruntime reproduces /predict (labels equal, decisions
within 1e-6 relative) for every model kind the service trains, on raw rows that the stored
min-max scaling has to clip, and for a model with categorical (one-hot) columns; the linear
weights of GET /models/{id} reproduce the scores with the documented clip (SQLite, and
PostgreSQL when TEST_DATABASE_URL is set)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from tests.app.export_support import (  # (shared with the bundle's tests)
    CATEGORICAL_CSV,
    categorical_queries,
    expected_of,
    numeric_data,
    predict_answer,
    trained_model,
)
from tests.app.support import assert_problem

# (id, algorithm, request fields, number of classes)
KINDS = [
    ("msvmav-linear", "msvmav", {}, 2),
    ("msvmav-linear-ovr", "msvmav", {}, 3),
    ("msvmav-rbf-exact", "msvmav", {"kernel": "rbf", "approximation": "exact"}, 2),
    (
        # gamma 1/d: rank 3 meets kernel_tol; at "scale" (5.3 here) 60 rows need more than the
        # 0.25 n = 15 pivots explicit low_rank may take, and the fit falls back to exact
        "msvmav-rbf-low-rank-ovr",
        "msvmav",
        {
            "kernel": "rbf",
            "gamma": "auto",
            "approximation": "low_rank",
            "kernel_tol": 0.05,
            "n_components": 30,
        },
        3,
    ),
    (
        "msvmav-rbf-nystroem",
        "msvmav",
        {"kernel": "rbf", "approximation": "nystroem", "n_components": 10},
        2,
    ),
    ("msvmav-poly", "msvmav", {"kernel": "poly", "degree": 2}, 2),
    ("msvmav-rbf-unscaled", "msvmav", {"kernel": "rbf", "scaling": "none", "gamma": 0.05}, 2),
    ("svm-linear-ovr", "svm", {}, 3),
    ("svm-rbf", "svm", {"kernel": "rbf"}, 2),
    ("svr-rbf-ovr", "svr", {"kernel": "rbf"}, 3),
    ("lssvm-rbf", "lssvm", {"kernel": "rbf"}, 2),
    ("mamc-linear", "mamc", {}, 2),
    ("mamc-rbf-ovr", "mamc", {"kernel": "rbf"}, 3),
    ("odm-linear-ovr", "odm", {}, 3),
    ("odm-rbf", "odm", {"kernel": "rbf"}, 2),
    ("fmm-linear", "fmm", {}, 2),
    ("fmm-rbf-ovr", "fmm", {"kernel": "rbf"}, 3),
    ("msvmav-linear-isotonic", "msvmav", {"calibration": "isotonic"}, 2),
    ("msvmav-rbf-isotonic-ovr", "msvmav", {"kernel": "rbf", "calibration": "isotonic"}, 3),
    ("msvmav-linear-uncalibrated", "msvmav", {"calibration": "none"}, 2),
]


def assert_decisions_equal(got: np.ndarray, expected: np.ndarray) -> None:
    """Within 1e-6 relative (to each value, and to the batch's largest one near zero)."""
    assert got.shape == expected.shape
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9 * scale)


def onnx_feed(sess: ort.InferenceSession, rows: list) -> dict[str, np.ndarray]:
    """The graph's inputs from raw rows: one [n, d] DOUBLE input X, or one [n, 1] input per
    column (DOUBLE numeric, STRING categorical)."""
    inputs = sess.get_inputs()
    if len(inputs) == 1 and inputs[0].name == "X":
        return {"X": np.asarray(rows, dtype=np.float64)}
    feed = {}
    for j, inp in enumerate(inputs):
        column = [row[j] for row in rows]
        dtype = object if inp.type == "tensor(string)" else np.float64
        feed[inp.name] = np.asarray(column, dtype=dtype).reshape(-1, 1)
    return feed


def run_onnx(content: bytes, rows: list) -> tuple[list, np.ndarray]:
    sess = ort.InferenceSession(content, providers=["CPUExecutionProvider"])
    label, decision = sess.run(["label", "decision"], onnx_feed(sess, rows))
    return label.tolist(), decision


def export_onnx(client, model_id: int) -> bytes:
    r = client.get(f"/models/{model_id}/export", params={"format": "onnx"})
    assert r.status_code == 200, r.text
    assert f"msvmav-model-{model_id}.onnx" in r.headers["content-disposition"]
    return r.content


@pytest.mark.parametrize(
    ("algorithm", "fields", "n_classes"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS]
)
def test_onnx_reproduces_predict_for_every_model_kind(client, worker, algorithm, fields, n_classes):
    content, queries = numeric_data(n_classes)
    model = trained_model(client, worker, content, algorithm=algorithm, **fields)
    if fields.get("approximation") in ("low_rank", "nystroem"):  # the path really taken
        assert 0 < model["kernel_summary"]["rank"] < model["n_train"], model["kernel_summary"]
    rows = queries.tolist()
    content = export_onnx(client, model["id"])
    labels, decisions = run_onnx(content, rows)
    answer = predict_answer(client, model["id"], rows)
    expected_labels, expected = expected_of(answer)
    assert labels == expected_labels
    assert_decisions_equal(decisions, expected)
    assert len(set(labels)) > 1  # the comparison is not over one constant answer
    # A calibrated model's graph has a `probabilities` output: /predict's within 1e-6.
    sess = ort.InferenceSession(content, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in sess.get_outputs()]
    if model["calibration"] == "none":
        assert outputs == ["label", "decision"]
        return
    assert outputs == ["label", "decision", "probabilities"]
    (P,) = sess.run(["probabilities"], onnx_feed(sess, rows))
    classes = [str(c) for c in answer["classes"]]
    expected_P = [[p["probabilities"][c] for c in classes] for p in answer["predictions"]]
    np.testing.assert_allclose(P, expected_P, rtol=0, atol=1e-6)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_onnx_of_a_categorical_model_takes_one_input_per_column(client, worker, kernel):
    model = trained_model(client, worker, CATEGORICAL_CSV.encode(), kernel=kernel)
    assert model["n_features"] == 8  # x0, colour (3), x1, size (3)
    content = export_onnx(client, model["id"])
    sess = ort.InferenceSession(content, providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in sess.get_inputs()] == [
        ("x0", "tensor(double)"),
        ("colour", "tensor(string)"),
        ("x1", "tensor(double)"),
        ("size", "tensor(string)"),
    ]
    rows = categorical_queries()
    labels, decisions = run_onnx(content, rows)
    expected_labels, expected = expected_of(predict_answer(client, model["id"], rows))
    assert labels == expected_labels and decisions.shape == (25, 3)
    assert_decisions_equal(decisions, expected)


def test_onnx_label_rule_breaks_ties_like_the_solver():
    """Decision exactly 0 predicts classes[0]; equal one-vs-rest scores predict the first
    (docs/algorithm.md, "Conventions"; numpy's argmax): checked on hand-made expansions."""
    from app.export.expansion import Expansion
    from app.export.onnx_graph import build_onnx
    from solver import Linear

    specs = [{"name": "a", "kind": "numeric"}, {"name": "b", "kind": "numeric"}]
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    binary = Expansion(np.array(["no", "yes"]), Linear(), np.array([[1.0], [-1.0]]), np.zeros(1))
    three = Expansion(
        np.array([10, 20, 30]), Linear(), np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), np.zeros(3)
    )
    for exp in (binary, three):
        content = build_onnx(specs, None, exp, name="t", metadata={})
        labels, decisions = run_onnx(content, X.tolist())
        D = exp.decision(X)
        index = (D[:, 0] > 0).astype(int) if D.shape[1] == 1 else np.argmax(D, axis=1)
        assert labels == exp.classes[index].tolist()
    # the ties are there: rows 0 and 3 score exactly 0 (binary) / equal first scores (three)
    assert run_onnx(build_onnx(specs, None, binary, name="t", metadata={}), X.tolist())[0] == [
        "no",
        "yes",
        "no",
        "no",
    ]
    assert run_onnx(build_onnx(specs, None, three, name="t", metadata={}), X.tolist())[0] == [
        10,
        10,
        30,
        10,
    ]


def test_linear_weights_reproduce_the_scores_with_the_documented_clip(client, worker):
    """Regression (issue 18): GET /models/{id}'s weights give /predict's scores only with the
    clip of the scaled features to [0, 1], which the schema now states."""
    content, queries = numeric_data(2)
    model = trained_model(client, worker, content)
    ranges = model["scaling_ranges"]
    lo, hi = np.asarray(ranges["data_min"]), np.asarray(ranges["data_max"])
    span = np.where(hi > lo, hi - lo, 1.0)
    coef = np.asarray(model["weights"]["coef"])
    b = np.asarray(model["weights"]["intercept"])
    _, expected = expected_of(predict_answer(client, model["id"], queries.tolist()))
    scaled = (queries - lo) / span
    assert_decisions_equal((np.clip(scaled, 0, 1) @ coef.T + b)[:, 0], expected)
    assert not np.allclose((scaled @ coef.T + b)[:, 0], expected, rtol=1e-3)  # clip matters
    spec = client.get("/openapi.json").json()["components"]["schemas"]["ModelDetail"]
    weights_doc = spec["properties"]["weights"]["description"]
    assert "clip" in weights_doc and "data_min" in weights_doc, weights_doc
    kernel_doc = spec["properties"]["kernel_summary"]["description"]
    assert "export" in kernel_doc, kernel_doc


def test_export_answers_404_and_422(client, worker):
    assert_problem(client.get("/models/999/export", params={"format": "onnx"}), 404)
    model = trained_model(client, worker)
    assert_problem(
        client.get(f"/models/{model['id']}/export", params={"format": "pmml"}), 422, "format"
    )
    r = client.get(f"/models/{model['id']}/export")  # the default format: the bundle
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"


def test_onnx_without_the_onnx_package_is_501_and_bundle_still_works(client, worker, monkeypatch):
    model = trained_model(client, worker)
    monkeypatch.setitem(sys.modules, "onnx", None)  # what `import onnx` meets when it is absent
    monkeypatch.delitem(sys.modules, "app.export.onnx_graph", raising=False)
    r = client.get(f"/models/{model['id']}/export", params={"format": "onnx"})
    body = assert_problem(r, 501)
    assert "msvmav[export]" in body["detail"]
    r = client.get(f"/models/{model['id']}/export", params={"format": "bundle"})
    assert r.status_code == 200 and r.content[:2] == b"PK"


def test_the_service_starts_without_the_onnx_package():
    script = (
        "import sys\n"
        "sys.modules['onnx'] = None  # import onnx fails, as where it is not installed\n"
        "from app.core.config import Settings\n"
        "from app.main import create_app\n"
        "app = create_app(Settings(database_url='sqlite://', _env_file=None))\n"
        "assert '/models/{model_ref}/export' in app.openapi()['paths']\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


def test_unsupported_estimators_are_named():
    from app.export.expansion import UnsupportedModelError, expansion
    from solver import SVM

    X = np.random.default_rng(0).random((20, 3))
    y = np.arange(20) % 2
    est = SVM(kernel="precomputed").fit(X @ X.T, y)
    with pytest.raises(UnsupportedModelError, match=r"SVM \(kernel precomputed\)"):
        expansion(est)
