"""missing = mean | median | most_frequent | constant: the dataset keeps its missing cells, the
fills are fitted on the training part only (scikit-learn's SimpleImputer is the reference), kept
in the model's encoding, applied at /predict, /predict/file and in the ONNX graph, and shown in
the model detail."""

from __future__ import annotations

import io
import json

import numpy as np
import onnxruntime as ort
import pytest
import scipy.sparse as sp
from sklearn.impute import SimpleImputer

from app.ingest.imputation import apply_fills, fit_fills
from solver.protocol import split_indices
from tests.app.support import run_jobs, submit, upload

COLOURS = ["red", "green", "blue"]
SEED, TEST_FRACTION = 3, 0.25


def _table(n: int = 120) -> tuple[list[list], list[str]]:
    """Rows [x0, colour, x1] with missing cells (None) in every column, and labels."""
    rng = np.random.default_rng(11)
    y = ["pos" if i % 2 else "neg" for i in range(n)]
    rows = []
    for i in range(n):
        shift = 3.0 if y[i] == "pos" else 0.0
        colour = COLOURS[rng.choice(3, p=[0.5, 0.3, 0.2] if y[i] == "pos" else [0.2, 0.3, 0.5])]
        rows.append([float(np.round(rng.normal(shift, 1.0) * 7 + 2, 4)), colour,
                     float(np.round(rng.exponential(2.0) + shift, 4))])
    for i in rng.choice(n, size=n // 5, replace=False).tolist():
        rows[i][int(rng.integers(3))] = None
    return rows, y


def _csv(rows: list[list], y: list[str] | None = None) -> bytes:
    out = io.StringIO()
    out.write("x0,colour,x1" + (",y" if y is not None else "") + "\n")
    for k, row in enumerate(rows):
        cells = ["" if v is None else str(v) for v in row]
        out.write(",".join(cells + ([y[k]] if y is not None else [])) + "\n")
    return out.getvalue().encode()


def _train(client, worker, params: dict | None = None, **form
           ) -> tuple[dict, list[list], list[str]]:
    rows, y = _table()
    ds = upload(client, _csv(rows, y), label="y", **form)
    assert ds["n_rows"] == len(rows)  # the rows with missing cells are kept
    job = submit(client, ds["id"], max_iter=30, test_fraction=TEST_FRACTION, seed=SEED,
                 **(params or {}))
    assert run_jobs(worker) == ["succeeded"], client.get(f"/jobs/{job['id']}").json()
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    return client.get(f"/models/{model_id}").json(), rows, y


def _reference(rows: list[list], y: list[str], strategy: str, fill_value=None) -> dict:
    """SimpleImputer's statistics on the training part's raw cells, per column."""
    train_idx, _ = split_indices(np.asarray(y), TEST_FRACTION, SEED)
    part = [rows[i] for i in train_idx]
    numeric = np.array([[np.nan if r[j] is None else r[j] for j in (0, 2)] for r in part])
    kwargs = {} if fill_value is None else {"fill_value": float(fill_value)}
    stats = SimpleImputer(strategy=strategy, **kwargs).fit(numeric).statistics_
    colours = np.array([[np.nan if r[1] is None else r[1]] for r in part], dtype=object)
    cat_strategy = "constant" if strategy == "constant" else "most_frequent"
    cat_kwargs = {"fill_value": fill_value} if fill_value is not None else {}
    cat = SimpleImputer(strategy=cat_strategy, **cat_kwargs).fit(colours).statistics_[0]
    all_numeric = np.array([[np.nan if r[j] is None else r[j] for j in (0, 2)] for r in rows])
    everything = SimpleImputer(strategy=strategy, **kwargs).fit(all_numeric).statistics_
    return {"x0": stats[0], "x1": stats[1], "colour": cat, "x0_all_rows": everything[0]}


def _fills(model: dict) -> dict:
    return {c["name"]: c["impute"]["fill"] for c in model["columns"]}


def _predict(client, model_id: int, instances: list) -> list[dict]:
    r = client.post("/predict", json={"model_id": model_id, "instances": instances})
    assert r.status_code == 200, r.text
    return [{k: v for k, v in p.items() if k != "id"} for p in r.json()["predictions"]]


@pytest.mark.parametrize(("strategy", "fill_value"), [
    ("mean", None), ("median", None), ("most_frequent", None), ("constant", "7.5")])
def test_fills_are_simple_imputer_s_on_the_training_part(client, worker, strategy, fill_value):
    form = {"missing": strategy} | ({"fill_value": fill_value} if fill_value else {})
    model, rows, y = _train(client, worker, **form)
    ref = _reference(rows, y, strategy, fill_value)
    fills = _fills(model)
    assert fills["x0"] == pytest.approx(ref["x0"], rel=1e-12)
    assert fills["x1"] == pytest.approx(ref["x1"], rel=1e-12)
    assert fills["colour"] == ref["colour"]
    if strategy == "mean":  # the hold-out's cells are not part of the fit
        assert fills["x0"] != pytest.approx(ref["x0_all_rows"], rel=1e-9)
    # the model detail: strategy and fill per column, and handle_unknown of the categorical one
    by_name = {c["name"]: c for c in model["columns"]}
    assert by_name["colour"]["handle_unknown"] == "error"
    assert {c["impute"]["strategy"] for c in model["columns"]} == {strategy}
    assert by_name["x0"]["kind"] == "numeric" and by_name["colour"]["kind"] == "categorical"


def test_a_row_with_missing_cells_is_scored_as_the_imputed_row(client, worker):
    model, rows, y = _train(client, worker, missing="median")
    fills = _fills(model)
    queries = [[None, "green", 1.5], [0.5, None, 2.0], [1.0, "red", None], [None, None, None]]
    imputed = [[fills[n] if v is None else v for n, v in zip(("x0", "colour", "x1"), q,
                                                             strict=True)] for q in queries]
    expected = _predict(client, model["id"], imputed)
    assert _predict(client, model["id"], queries) == expected
    records = [{"x0": q[0], "colour": q[1], "x1": q[2]} for q in queries]
    assert _predict(client, model["id"], records) == expected
    split = {"columns": ["x0", "colour", "x1"], "data": queries}
    r = client.post(f"/models/{model['id']}/invocations", json={"dataframe_split": split})
    assert r.status_code == 200, r.text
    assert [p["label"] for p in r.json()["predictions"]] == [p["label"] for p in expected]
    np.testing.assert_allclose([p["decision_value"] for p in r.json()["predictions"]],
                               [p["decision_value"] for p in expected], rtol=1e-12)
    # (a line of empty cells only, ",,", is a blank line to the CSV reader: not a row)
    r = client.post("/predict/file", files={"file": ("q.csv", _csv(queries[:3]))},
                    data={"model_id": str(model["id"])})
    assert r.status_code == 200, r.text
    got = r.json()["predictions"]
    assert [p["label"] for p in got] == [p["label"] for p in expected[:3]]
    np.testing.assert_allclose([p["decision_value"] for p in got],
                               [p["decision_value"] for p in expected[:3]], rtol=1e-12)


def test_onnx_graph_imputes_like_predict(client, worker):
    model, rows, y = _train(client, worker, {"handle_unknown": "ignore"}, missing="mean")
    by_name = {c["name"]: c for c in model["columns"]}
    assert by_name["colour"]["handle_unknown"] == "ignore"  # chosen at training, shown
    queries = [[None, "green", 1.5], [0.5, None, 2.0], [1.0, "red", None], [2.0, "blue", 0.1],
               [1.0, "violet", 1.0]]
    expected = _predict(client, model["id"], queries)
    r = client.get(f"/models/{model['id']}/export", params={"format": "onnx"})
    assert r.status_code == 200, r.text
    sess = ort.InferenceSession(r.content, providers=["CPUExecutionProvider"])
    feed = {
        "x0": np.array([[np.nan if q[0] is None else q[0]] for q in queries]),
        "colour": np.array([["" if q[1] is None else q[1]] for q in queries], dtype=object),
        "x1": np.array([[np.nan if q[2] is None else q[2]] for q in queries]),
    }
    label, decision = sess.run(["label", "decision"], feed)
    assert label.tolist() == [p["label"] for p in expected]
    np.testing.assert_allclose(decision, [p["decision_value"] for p in expected],
                               rtol=1e-6, atol=1e-9)


def test_error_and_drop_are_unchanged_and_bad_options_are_422(client):
    rows, y = _table()
    content = _csv(rows, y)
    r = client.post("/datasets", files={"file": ("d.csv", content)}, data={"label": "y"})
    assert r.status_code == 422 and "missing" in r.text
    dropped = upload(client, content, label="y", missing="drop")
    assert dropped["n_rows"] == sum(None not in row for row in rows)
    for form, field in (({"missing": "constant", "fill_value": "abc"}, "fill_value"),
                        ({"missing": "mean", "fill_value": "1"}, "fill_value"),
                        ({"missing": "average"}, "missing")):
        r = client.post("/datasets", files={"file": ("d.csv", content)},
                        data={"label": "y", **form})
        assert r.status_code == 422, (form, r.text)
        assert field in r.text
    no_label = content.replace(b",neg\n", b",\n", 1)
    r = client.post("/datasets", files={"file": ("d.csv", no_label)},
                    data={"label": "y", "missing": "mean"})
    assert r.status_code == 422 and "label cannot be imputed" in r.text


def test_numeric_model_imputes_nan_tensors_at_v2(client, worker):
    """A numeric-only model: NaN cells of a /v2 FP64 tensor (the one-array path) and null at
    /predict take the fills."""
    rows, y = _table()
    numeric = [[r[0], r[2]] for r in rows]
    content = "x0,x1,y\n" + "".join(
        ",".join(["" if v is None else str(v) for v in r] + [lab]) + "\n"
        for r, lab in zip(numeric, y, strict=True))
    ds = upload(client, content.encode(), label="y", missing="mean")
    job = submit(client, ds["id"], max_iter=30, test_fraction=TEST_FRACTION, seed=SEED)
    assert run_jobs(worker) == ["succeeded"]
    model_id = client.get(f"/jobs/{job['id']}").json()["model_id"]
    model = client.get(f"/models/{model_id}").json()
    fills = _fills(model)
    queries = np.array([[np.nan, 1.0], [4.0, np.nan], [2.0, 3.0]])
    imputed = np.where(np.isnan(queries), [[fills["x0"], fills["x1"]]], queries)
    expected = _predict(client, model["id"], imputed.tolist())
    nulls = [[None if np.isnan(v) else float(v) for v in q] for q in queries]
    assert _predict(client, model["id"], nulls) == expected
    header = json.dumps({"inputs": [{"name": "input", "shape": [3, 2], "datatype": "FP64",
                                     "parameters": {"binary_data_size": 48}}],
                         "outputs": [{"name": "decision", "parameters": {"binary_data": False}}]
                         }).encode()
    r = client.post(f"/v2/models/{model['id']}/infer", content=header + queries.tobytes(),
                    headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 200, r.text
    decision = r.json()["outputs"][0]["data"]
    np.testing.assert_allclose(decision, [p["decision_value"] for p in expected], rtol=1e-12)
    # the ONNX graph's single input X: NaN cells replaced by the fills
    r = client.get(f"/models/{model['id']}/export", params={"format": "onnx"})
    sess = ort.InferenceSession(r.content, providers=["CPUExecutionProvider"])
    (onnx_decision,) = sess.run(["decision"], {"X": queries})
    np.testing.assert_allclose(onnx_decision, [p["decision_value"] for p in expected],
                               rtol=1e-6, atol=1e-9)


def test_fills_of_a_csr_matrix_equal_the_dense_ones():
    """apply_fills on CSR (wide one-hot datasets are stored so) gives the dense result."""
    encoding = {"columns": [
        {"name": "a", "kind": "numeric", "impute": {"strategy": "mean"}},
        {"name": "c", "kind": "categorical", "categories": ["p", "q", "r"],
         "impute": {"strategy": "most_frequent"}},
        {"name": "b", "kind": "numeric", "impute": {"strategy": "median"}}]}
    X = np.array([[1.0, 0, 1, 0, 0.0], [np.nan, 0, 0, 1, 2.0], [3.0, np.nan, 0, 0, np.nan],
                  [0.0, 0, 0, 1, 5.0], [2.0, 1, 0, 0, 4.0]])
    fitted = fit_fills(sp.csr_matrix(X), encoding)
    assert fitted == fit_fills(X.copy(), encoding)
    assert [c["impute"]["fill"] for c in fitted["columns"]] == [1.5, "r", 3.0]
    dense = apply_fills(X.copy(), fitted)
    assert not np.isnan(dense).any() and dense[2, 1:4].tolist() == [0, 0, 1]
    np.testing.assert_array_equal(apply_fills(sp.csr_matrix(X), fitted).toarray(), dense)


@pytest.mark.parametrize("source", ["file", "dataset"])
def test_batch_job_scores_missing_cells_as_imputed(client, worker, source):
    """A batch job over a file with missing cells (chunked) and over the stored dataset (its
    NaN cells): every row scored as /predict scores the imputed row."""
    model, rows, y = _train(client, worker, missing="most_frequent")
    fills = _fills(model)
    data = {"model_id": str(model["id"]), "chunk_rows": "25", "on_error": "fail"}
    if source == "file":
        r = client.post("/batch-predictions", files={"file": ("q.csv", _csv(rows))}, data=data)
    else:
        r = client.post("/batch-predictions", data={**data, "dataset_id": str(model["dataset_id"])})
    assert r.status_code == 202, r.text
    run_jobs(worker)
    job = client.get(f"/jobs/{r.json()['id']}").json()
    assert job["status"] == "succeeded", job
    out = np.genfromtxt(io.BytesIO(client.get(f"/batch-predictions/{job['id']}/result").content),
                        delimiter=",", names=True, dtype=None, encoding="utf-8")
    imputed = [[fills[n] if v is None else v for n, v in zip(("x0", "colour", "x1"), row,
                                                             strict=True)] for row in rows]
    expected = _predict(client, model["id"], imputed)
    assert len(out) == len(rows) and any(None in row for row in rows)
    assert out["label"].tolist() == [p["label"] for p in expected]
    np.testing.assert_allclose(out["decision_value"], [p["decision_value"] for p in expected],
                               rtol=1e-9, atol=1e-12)


def test_stored_dataset_doors_and_experiments(client, worker):
    """Evaluating a model on its stored dataset scores the NaN cells as imputed (the same
    accuracy as the imputed rows at /predict); the profile counts the missing cells; an
    experiment on a dataset waiting for imputation is a 422 naming it."""
    model, rows, y = _train(client, worker, missing="mean")
    fills = _fills(model)
    r = client.post(f"/models/{model['id']}/evaluate",
                    data={"dataset_id": str(model["dataset_id"]), "rows": "all"})
    assert r.status_code == 200, r.text
    imputed = [[fills[n] if v is None else v for n, v in zip(("x0", "colour", "x1"), row,
                                                             strict=True)] for row in rows]
    labels = [p["label"] for p in _predict(client, model["id"], imputed)]
    accuracy = np.mean([a == b for a, b in zip(labels, y, strict=True)])
    assert r.json()["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    profile = client.get(f"/datasets/{model['dataset_id']}/profile").json()
    missing = {c["name"]: c["missing"] for c in profile["columns"]}
    assert missing == {n: sum(row[j] is None for row in rows)
                       for j, n in enumerate(("x0", "colour", "x1"))}
    r = client.post("/experiments", json={"dataset_ids": [model["dataset_id"]],
                                          "algorithms": ["msvmav"]})
    assert r.status_code == 422 and "experiments do not impute" in r.text, r.text
