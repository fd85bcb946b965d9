"""GET /models/{id}/export?format=bundle, POST /models/import and load_bundle: a model moves to
another service and predicts identically; the library call predicts from raw rows without the
service; a truncated, tampered, future-version or pickle-holding bundle is refused with 422
naming the problem and nothing is written (SQLite, and PostgreSQL when TEST_DATABASE_URL is
set)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.export.bundle import BundleTooLargeError, load_bundle, read_bundle
from app.main import create_app
from tests.app.export_support import (
    _counts,
    expected_of,
    export_bundle,
    import_bundle,
    linear_bundle,  # noqa: F401 - a fixture
    npy,
    numeric_data,
    predict_answer,
    rezip,
    source_model,
    trained_model,
)
from tests.app.support import assert_problem, migrated_database

ROOT = Path(__file__).resolve().parents[2]

MOVES = [
    ("msvmav-linear", {}, 2),
    ("msvmav-rbf-exact-ovr", {"kernel": "rbf", "approximation": "exact"}, 3),
    ("msvmav-nystroem", {"kernel": "rbf", "approximation": "nystroem", "n_components": 10}, 2),
    ("svm-rbf", {"algorithm": "svm", "kernel": "rbf"}, 2),
    ("lssvm-poly-ovr", {"algorithm": "lssvm", "kernel": "poly", "degree": 2}, 3),
    ("odm-linear", {"algorithm": "odm"}, 2),
    ("categorical", {"kernel": "rbf"}, "categorical"),
]


@pytest.fixture
def other(database_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """A second service with its own, freshly migrated database on the same backend."""
    backend = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    with migrated_database(backend, tmp_path) as url:
        settings = Settings(database_url=url, _env_file=None)
        with TestClient(create_app(settings)) as c:
            yield c
        c.app.state.engine.dispose()


@pytest.mark.parametrize(("fields", "kind"), [m[1:] for m in MOVES], ids=[m[0] for m in MOVES])
def test_a_bundle_moves_a_model_to_another_service(client, worker, other, fields, kind):
    if kind == "categorical":
        model, rows = source_model(client, worker, kind)
    else:
        content, queries = numeric_data(kind)
        model, rows = trained_model(client, worker, content, **fields), queries.tolist()
    r = import_bundle(other, export_bundle(client, model["id"]))
    assert r.status_code == 201, r.text
    moved = r.json()
    assert r.headers["location"] == f"/models/{moved['id']}"
    assert moved["dataset_id"] is None and moved["job_id"] is None
    for key in (
        "algorithm",
        "params",
        "classes",
        "n_features",
        "feature_names",
        "weights",
        "kernel_summary",
        "scaling_ranges",
        "train_margins",
        "n_train",
    ):
        assert moved[key] == model[key], key
    assert other.get(f"/models/{moved['id']}").json() == moved
    source = predict_answer(client, model["id"], rows)
    target = predict_answer(other, moved["id"], rows)
    assert target["predictions"] == source["predictions"]  # identical, not merely close


@pytest.mark.parametrize("kind", [2, 3, "categorical"])
def test_load_bundle_predicts_raw_rows_like_the_service(client, worker, tmp_path, kind):
    model, rows = source_model(client, worker, kind)
    path = tmp_path / "model.zip"
    path.write_bytes(export_bundle(client, model["id"]))
    loaded = load_bundle(path)
    labels, decisions = expected_of(predict_answer(client, model["id"], rows))
    names = loaded.feature_names if kind != "categorical" else ["x0", "colour", "x1", "size"]
    records = [dict(zip(names, row, strict=True)) for row in rows]
    for given in (rows, records, pd.DataFrame(records)):
        assert loaded.predict(given).tolist() == labels
        np.testing.assert_array_equal(loaded.decision_function(given), decisions)
    assert loaded.classes_.tolist() == model["classes"]
    # the calibrator travels in the bundle: /predict's probabilities, within 1e-9
    answer = predict_answer(client, model["id"], rows)
    classes = [str(c) for c in answer["classes"]]
    expected = [[p["probabilities"][c] for c in classes] for p in answer["predictions"]]
    np.testing.assert_allclose(loaded.predict_proba(rows), expected, rtol=0, atol=1e-9)


def test_load_bundle_needs_neither_the_web_framework_nor_the_database(client, worker, tmp_path):
    model, rows = source_model(client, worker, 3)
    path = tmp_path / "model.zip"
    path.write_bytes(export_bundle(client, model["id"]))
    labels, _ = expected_of(predict_answer(client, model["id"], rows))
    script = (
        "import json, sys\n"
        "from app.export.bundle import load_bundle\n"
        f"m = load_bundle({str(path)!r})\n"
        f"print(json.dumps(m.predict({rows!r}).tolist()))\n"
        "web = sorted({k.split('.')[0] for k in sys.modules} & "
        "{'fastapi', 'starlette', 'sqlalchemy', 'psycopg', 'onnx'})\n"
        "assert not web, web\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == labels


def test_an_rbf_models_support_vectors_are_in_the_bundle(client, worker):
    """Regression (issue 18): the support vectors and dual coefficients leave the service; with
    them and the scaling, an independent numpy computation gives /predict's decisions."""
    content, queries = numeric_data(2)
    model = trained_model(client, worker, content, algorithm="svm", kernel="rbf")
    with zipfile.ZipFile(io.BytesIO(export_bundle(client, model["id"]))) as zf:
        arr = {
            n[len("arrays/") : -4]: np.load(io.BytesIO(zf.read(n)), allow_pickle=False)
            for n in zf.namelist()
            if n.endswith(".npy")
        }
        gamma = json.loads(zf.read("estimator.json"))["attributes"]["gamma_"]
    sv, dual, b = arr["est.X_fit_"], arr["est.dual_coef_"], arr["est.intercept_"]
    lo, hi = arr["scaling.data_min"], arr["scaling.data_max"]
    X = np.clip((queries - lo) / np.where(hi > lo, hi - lo, 1.0), 0, 1)
    sq = ((X[:, None, :] - sv[None, :, :]) ** 2).sum(axis=2)
    ours = np.exp(-gamma * sq) @ dual + b
    _, expected = expected_of(predict_answer(client, model["id"], queries.tolist()))
    np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-12)
    assert 0 < sv.shape[0] < model["n_train"]  # the support vectors, not all training rows


# --- refused bundles ---------------------------------------------------------------------------


def _tamper(m: dict) -> None:
    coef = np.load(io.BytesIO(m["arrays/est.coef_.npy"]))
    m["arrays/est.coef_.npy"] = npy(-coef)


def _future(m: dict) -> None:
    manifest = json.loads(m["manifest.json"])
    m["manifest.json"] = json.dumps({**manifest, "version": 2}).encode()


def _object_array(m: dict) -> None:
    m["arrays/est.coef_.npy"] = npy(np.array([[{"x": 1}, 2, 3]], dtype=object), True)


def _pickle_member(m: dict) -> None:
    m["arrays/est.coef_.pkl"] = pickle.dumps(np.zeros(3))


def _pickle_json(m: dict) -> None:
    m["model.json"] = pickle.dumps({"algorithm": "msvmav"})


def _shape(m: dict) -> None:
    m["arrays/est.coef_.npy"] = npy(np.zeros((1, 7)))


def _foreign(m: dict) -> None:
    m["arrays/est.__class__.npy"] = npy(np.zeros(1))


def _nan(m: dict) -> None:
    m["model.json"] = m["model.json"].replace(b'"fit_seconds": ', b'"fit_seconds": NaN, "x": ')


def _attribute(m: dict) -> None:
    meta = json.loads(m["estimator.json"])
    meta["attributes"]["_decision"] = "anything"
    m["estimator.json"] = json.dumps(meta).encode()


def _calibrator(m: dict) -> None:
    meta = json.loads(m["estimator.json"])
    meta["calibrator"]["classes"] = [0, 1, 2]  # three classes for a model of two
    m["estimator.json"] = json.dumps(meta).encode()


def _calibrator_format(m: dict) -> None:
    meta = json.loads(m["estimator.json"])
    meta["calibrator"]["params"] = [{"a": "x"}]
    m["estimator.json"] = json.dumps(meta).encode()


REFUSALS: list[tuple[str, Callable[[bytes], bytes], str]] = [
    ("truncated", lambda b: b[: len(b) // 2], "truncated"),
    ("not-a-zip", lambda b: b"a,b,y\n1,2,3\n", "not a zip"),
    ("whole-file-pickle", lambda b: pickle.dumps({"coef": [1.0]}), "pickle"),
    ("tampered", lambda b: rezip(b, _tamper, checksums=False), "checksum mismatch"),
    ("future-version", lambda b: rezip(b, _future, checksums=False), "version 2 is newer"),
    ("object-array", lambda b: rezip(b, _object_array), "pickled Python objects"),
    ("pickle-member", lambda b: rezip(b, _pickle_member), "est.coef_.pkl is not part"),
    ("pickle-as-json", lambda b: rezip(b, _pickle_json), "model.json is a pickle"),
    (
        "member-missing",
        lambda b: rezip(b, lambda m: m.update({"encoding.json": None}), checksums=False),
        "encoding.json is listed",
    ),
    ("arrays-disagree", lambda b: rezip(b, _shape), "do not fit together"),
    ("foreign-array", lambda b: rezip(b, _foreign), "not an array of MSVMAv"),
    ("foreign-attribute", lambda b: rezip(b, _attribute), "attributes must be among MSVMAv"),
    ("nan-in-json", lambda b: rezip(b, _nan), "NaN is not a JSON number"),
    ("calibrator-misfit", lambda b: rezip(b, _calibrator), "calibrator"),
    ("calibrator-malformed", lambda b: rezip(b, _calibrator_format), "estimator.json"),
]


@pytest.mark.parametrize(
    ("spoil", "named"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_spoilt_bundle_is_refused_and_nothing_is_written(
    client, engine, linear_bundle, spoil, named  # noqa: F811 - the fixture
):
    before = _counts(engine)
    body = assert_problem(import_bundle(client, spoil(linear_bundle)), 422, "file")
    assert named in body["detail"], body["detail"]
    assert _counts(engine) == before
    with pytest.raises(ValueError, match="bundle|member|estimator|pickle|version"):
        read_bundle(spoil(linear_bundle), 1 << 30)  # the library refuses it the same way


def test_an_unspoilt_rezip_is_accepted(client, linear_bundle):  # noqa: F811
    """The refusals above are the spoiling, not the re-packing."""
    assert import_bundle(client, rezip(linear_bundle, lambda m: None)).status_code == 201


def test_a_bundle_beyond_the_upload_limit_is_413(settings, engine, linear_bundle):  # noqa: F811
    small = settings.model_copy(update={"max_upload_bytes": len(linear_bundle) - 1})
    before = _counts(engine)
    with TestClient(create_app(small)) as c:
        body = assert_problem(import_bundle(c, linear_bundle), 413)
    assert "limit" in body["detail"] and _counts(engine) == before
    with pytest.raises(BundleTooLargeError):
        read_bundle(linear_bundle, len(linear_bundle) - 1)


def test_an_import_retried_with_its_idempotency_key_stores_one_model(client, engine, worker):
    model, _ = source_model(client, worker, 2)
    bundle = export_bundle(client, model["id"])
    before = _counts(engine)
    key = {"Idempotency-Key": "import-once"}
    first = client.post("/models/import", files={"file": ("m.zip", bundle)}, headers=key)
    again = client.post("/models/import", files={"file": ("m.zip", bundle)}, headers=key)
    assert first.status_code == again.status_code == 201, again.text
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert _counts(engine)[0] == before[0] + 1
    other_model, _ = source_model(client, worker, 3)
    different = export_bundle(client, other_model["id"])
    r = client.post("/models/import", files={"file": ("m.zip", different)}, headers=key)
    assert_problem(r, 409, "Idempotency-Key")
