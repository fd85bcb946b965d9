"""/predict's serving path: the model cache, read-only transactions, the JSON fast path."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from app.core.db import is_sqlite
from app.main import create_app
from app.models import service as models_service
from app.serving.model import ServedModel
from tests.app.serving_support import (  # (shared with other test modules)
    _reference_decisions,
)
from tests.app.support import (
    assert_problem,
    blobs,
    sqlite_write_lock,
    to_csv,
    trained_model,
)


def _cache(app):
    return app.state.runtime.get(models_service.MODEL_CACHE)


def _predict(client, model_id, X, **extra):
    # One request id: the rows' default ids ("{request_id}:{row}") equal between requests.
    r = client.post(
        "/predict",
        json={"model_id": model_id, "instances": X.tolist(), **extra},
        headers={"X-Request-ID": "serving"},
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_cache_hit_answers_like_a_cold_load(client, worker, app):
    model = trained_model(client, worker)
    X, y = blobs(n=12, seed=3)
    cache = _cache(app)
    assert cache.get(model["id"]) is None
    cold = _predict(client, model["id"], X, labels=y.tolist())
    assert cache.get(model["id"]) is not None
    warm = _predict(client, model["id"], X, labels=y.tolist())
    assert warm == cold
    got = [p["decision_value"] for p in warm["predictions"]]
    np.testing.assert_allclose(got, _reference_decisions(app, model["id"], X), rtol=1e-12)
    # The response keeps its documented shape (binary: decision_values is null).
    assert set(warm) == {
        "model_id",
        "model",
        "version",
        "alias",
        "classes",
        "n",
        "n_clipped",  # rows outside the training range (issue 43)
        "predictions",
        "accuracy",
        "margins",
        "decision_rule",  # the rule that made the labels (issue 44)
        "arm",  # which arm of an alias's canary answered (issue 48; null otherwise)
    }
    assert warm["predictions"][0]["decision_values"] is None


def test_multiclass_cache_hit_matches_reference(client, worker, app):
    X, y = blobs(n=90, classes=("a", "b", "c"), shift=4.0)
    model = trained_model(client, worker, content=to_csv(X, y))
    cold = _predict(client, model["id"], X[:9])
    warm = _predict(client, model["id"], X[:9])
    assert warm == cold
    ref = _reference_decisions(app, model["id"], X[:9])
    np.testing.assert_allclose([p["decision_values"] for p in warm["predictions"]], ref)
    assert [p["label"] for p in warm["predictions"]] == [
        ["a", "b", "c"][i] for i in ref.argmax(axis=1)
    ]


def test_deleted_model_is_not_served_from_the_cache(client, worker, app):
    model = trained_model(client, worker)
    X, _ = blobs(n=3, seed=1)
    _predict(client, model["id"], X)
    assert _cache(app).get(model["id"]) is not None
    assert client.delete(f"/models/{model['id']}").status_code == 204
    assert _cache(app).get(model["id"]) is None
    r = client.post("/predict", json={"model_id": model["id"], "instances": X.tolist()})
    assert assert_problem(r, 404, "model_id")["detail"].endswith(f"model {model['id']} not found")
    assert client.get(f"/models/{model['id']}").status_code == 404


def test_model_deleted_by_another_api_process_is_not_served(worker, settings, engine):
    """Two apps, two engines, two caches: the delete in one is seen at once by the other when
    it reads on every request (MSVMAV_SERVE_RECHECK_SECONDS=0, SQLite's default; the bound of
    a longer window: tests/app/test_serving_recheck.py)."""
    strict = settings.model_copy(update={"serve_recheck_seconds": 0.0})
    with TestClient(create_app(strict)) as client:
        app = client.app
        model = trained_model(client, worker)
        X, _ = blobs(n=3, seed=2)
        _predict(client, model["id"], X)
        assert _cache(app).get(model["id"]) is not None
        other = create_app(settings)
        with TestClient(other) as c2:
            assert c2.delete(f"/models/{model['id']}").status_code == 204
        r = client.post("/predict", json={"model_id": model["id"], "instances": X.tolist()})
        assert_problem(r, 404, "model_id")
        assert _cache(app).get(model["id"]) is None


def test_concurrent_predicts_on_several_models_agree_with_sequential_answers(client, worker):
    ids = [trained_model(client, worker, alpha=a)["id"] for a in (1.0, 16.0)]
    batches = [blobs(n=5 + k, seed=10 + k)[0] for k in range(4)]
    expected = {(i, k): _predict(client, i, X) for i in ids for k, X in enumerate(batches)}

    def call(key):
        i, k = key
        return key, client.post(
            "/predict",
            json={"model_id": i, "instances": batches[k].tolist()},
            headers={"X-Request-ID": "serving"},  # as _predict's: the same default ids
        )

    keys = list(expected) * 6
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, keys))
    for key, r in results:
        assert r.status_code == 200, r.text
        assert r.json() == expected[key]


def test_model_cache_is_bounded_by_bytes_and_evicts_least_recently_used():
    def entry(i: int, nbytes: int) -> ServedModel:
        return ServedModel(
            id=i, n_features=1, encoding={}, estimator=None, scaling=None, nbytes=nbytes
        )

    cache = models_service.ModelCache(max_bytes=100)
    cache.put(entry(1, 40))
    cache.put(entry(2, 40))
    assert cache.get(1) is not None  # 1 is now the most recently used
    cache.put(entry(3, 40))  # 120 > 100: evicts 2
    assert cache.get(2) is None and cache.get(1) is not None and cache.get(3) is not None
    assert cache.nbytes == 80 and len(cache) == 2
    cache.put(entry(4, 101))  # larger than the whole budget: not kept, nothing evicted
    assert cache.get(4) is None and len(cache) == 2
    cache.put(entry(3, 10))  # replacing an entry accounts for its old size
    assert cache.nbytes == 50
    cache.drop(1)
    assert cache.get(1) is None and cache.nbytes == 10


def test_predict_does_not_wait_for_the_sqlite_write_lock(client, worker, app, settings):
    """Another process holding the write lock (a worker's claim, an upload) does not stall
    /predict: its reads are deferred transactions. Before, each read took BEGIN IMMEDIATE and
    queued behind the writer for as long as it held the lock."""
    if not is_sqlite(settings.database_url):
        pytest.skip("SQLite's write lock")
    model = trained_model(client, worker)
    X, _ = blobs(n=4, seed=4)
    expected = _predict(client, model["id"], X)
    _cache(app).drop(model["id"])  # the cold path too must not need the lock
    hold = 8.0
    with sqlite_write_lock(settings.database_url, hold):
        for _ in range(2):  # cold, then warm
            t0 = time.monotonic()
            got = _predict(client, model["id"], X)
            assert time.monotonic() - t0 < hold / 2
            assert got == expected


def test_nan_and_huge_integer_literals_keep_their_answers(client, worker):
    """orjson refuses NaN and integers beyond 64 bits; such bodies fall back to the standard
    library's parser and keep the row- and column-naming answers they had."""
    model = trained_model(client, worker)
    mid = model["id"]
    body = f'{{"model_id": {mid}, "instances": [[1.0, 2.0, 3.0], [1.0, NaN, 3.0]]}}'
    r = client.post("/predict", content=body, headers={"Content-Type": "application/json"})
    problem = assert_problem(r, 422)
    assert problem["detail"] == "instances[1]: rows[1], column 'x1': missing value (NaN)."
    assert problem["errors"][0]["loc"] == ["body", "instances", 1]
    huge = json.dumps({"model_id": model["id"], "instances": [[1.0, 2.0, 10**30]]})
    r = client.post("/predict", content=huge, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    bad = f'{{"model_id": {mid}, "instances": [[1.0, 2.0'
    r = client.post("/predict", content=bad, headers={"Content-Type": "application/json"})
    assert_problem(r, 422)


def test_row_that_is_neither_list_nor_record_is_named(client, worker):
    model = trained_model(client, worker)
    r = client.post(
        "/predict", json={"model_id": model["id"], "instances": [[1.0, 2.0, 3.0], "abc"]}
    )
    problem = assert_problem(r, 422)
    assert problem["errors"][0]["loc"] == ["body", "instances", 1]
    assert "rows[1] must be a list of values or an object" in problem["detail"]


def test_a_warm_predict_reads_no_model_json_and_no_blobs(client, worker, app):
    model = trained_model(client, worker)
    X, _ = blobs(n=2, seed=8)
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        _predict(client, model["id"], X)  # cold: the model row and its arrays
        cold = list(statements)
        statements.clear()
        _predict(client, model["id"], X)
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert any("model_arrays" in s for s in cold) and any("estimator_meta" in s for s in cold)
    assert not any("model_arrays" in s or "estimator_meta" in s for s in statements), statements


def test_get_requests_do_not_wait_for_the_sqlite_write_lock(client, worker, app, settings):
    """GET requests read in read-only transactions too: a writer holding SQLite's lock (a big
    upload, a frozen worker) does not hold up job polling or listings."""
    if not is_sqlite(settings.database_url):
        pytest.skip("SQLite's write lock")
    model = trained_model(client, worker)
    paths = [
        "/datasets",
        f"/datasets/{model['dataset_id']}",
        "/jobs",
        f"/jobs/{model['job_id']}",
        "/models",
        f"/models/{model['id']}",
        f"/models/{model['id']}/margins",
        f"/models/{model['id']}/margins?dataset_id={model['dataset_id']}",
    ]
    expected = {p: client.get(p).json() for p in paths}
    hold = 8.0
    with sqlite_write_lock(settings.database_url, hold):
        t0 = time.monotonic()
        got = {p: client.get(p).json() for p in paths}
        assert time.monotonic() - t0 < hold / 2
        assert got == expected


def test_a_read_only_transaction_cannot_write_and_leaves_its_connection_writable(
    app, engine, settings
):
    """On SQLite a write in a read-only transaction fails every time (PRAGMA query_only), not
    only when another process commits in between; the pooled connection writes again for
    its next user."""
    if not is_sqlite(settings.database_url):
        pytest.skip("SQLite's query_only")
    with app.state.read_session_factory() as session:
        assert session.execute(text("SELECT count(*) FROM datasets")).scalar() == 0
        with pytest.raises(OperationalError, match="readonly"):
            session.execute(text("DELETE FROM datasets"))
    for _ in range(3):  # whichever pooled connection comes next
        with app.state.session_factory() as session:
            session.execute(text("DELETE FROM datasets"))
            session.commit()
