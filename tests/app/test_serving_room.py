"""The serving room (app.serving): every door answers through one template, acquiring its
model one way. Here: a /v2 infer, an invocation and a /predict by a registered name make no
database read while their checks are younger than app.core.recheck's window (counted with
SQLAlchemy's events on the app's real engine and on its reader pool, the per-request checks'),
and read again once it passed; a request is logged once, however its answer fails. The
window's clock is the test's (events, not sleeps)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import text

from app.core.config import Settings
from app.main import create_app
from app.monitoring import log as prediction_log
from app.predict import service as predict_service
from app.serving import lanes, refresh, sinks
from tests.app.serving_support import Reads
from tests.app.support import blobs, trained_model

WINDOW = 30.0
ADMIN = "admin-key-of-the-serving-room-tests-0123456789"
X, _ = blobs(n=2, seed=5)
ROWS = X.tolist()
_ID = {"X-Request-ID": "room"}  # the same generated row ids in every answer


@pytest.fixture
def served(settings: Settings, engine) -> Iterator[TestClient]:
    """The API process under test, trusting its checks for WINDOW seconds, keys required (the
    environment's admin key: an open service asks every second whether a key was created
    meanwhile, app.auth.gate, a read outside the serving room's checks)."""
    windowed = settings.model_copy(
        update={"serve_recheck_seconds": WINDOW, "admin_key": SecretStr(ADMIN)}
    )
    with TestClient(create_app(windowed), headers={"Authorization": f"Bearer {ADMIN}"}) as c:
        yield c


def _registered(client: TestClient, worker) -> int:
    model_id = trained_model(client, worker)["id"]
    assert client.post("/registered-models", json={"name": "credit"}).status_code == 201
    r = client.post("/registered-models/credit/versions", json={"model_id": model_id})
    assert r.status_code == 201, r.text
    return model_id


def _v2(client: TestClient) -> dict:
    body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": [2, 3],
                        "data": X.reshape(-1).tolist()}]}
    r = client.post("/v2/models/credit/infer", json=body, headers=_ID)
    assert r.status_code == 200, r.text
    return r.json()


def _invocations(client: TestClient) -> dict:
    r = client.post("/models/credit/invocations", json={"instances": ROWS}, headers=_ID)
    assert r.status_code == 200, r.text
    return r.json()


def _predict(client: TestClient) -> dict:
    r = client.post("/predict", json={"model": "credit", "instances": ROWS}, headers=_ID)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("door", [_v2, _invocations, _predict], ids=["v2", "invocations",
                                                                      "predict"])
def test_a_request_by_name_reads_nothing_inside_the_recheck_window(served, worker, clock, door):
    _registered(served, worker)
    with Reads(served.app) as reads:
        first = door(served)  # the name resolved and the model read: reads
    assert reads.seen, "the first request must read (else this test counts nothing)"
    clock.t += WINDOW - 0.001
    with Reads(served.app) as reads:
        again = door(served)
    assert reads.seen == [], reads.seen
    assert again == first
    served.app.state.runtime.get(refresh.REFRESHER).wait()  # (/predict renews checks ahead)
    clock.t += WINDOW + 1.0  # the window passed since any check: the name is read again
    with Reads(served.app) as reads:
        door(served)
    assert reads.seen


def test_v2_answers_what_predict_answers_through_the_one_core(served, worker, clock):
    """The same rows at /v2 and /predict: the same labels and decision values (one core)."""
    _registered(served, worker)
    predicted = _predict(served)["predictions"]
    outputs = {o["name"]: o for o in _v2(served)["outputs"]}
    assert outputs["label"]["data"] == [p["label"] for p in predicted]
    assert outputs["decision"]["data"] == pytest.approx([p["decision_value"] for p in predicted])


def _logged(app) -> int:
    """Rows in the prediction log once the writer took every row queued so far."""
    writer = prediction_log.writer(app.state.runtime)
    assert writer is not None and writer.catch_up(30.0) == 0
    with app.state.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM prediction_log")).scalar_one()


def test_a_request_whose_answer_fails_after_it_was_logged_is_not_answered_again(
    app, worker, monkeypatch
):
    """/predict's middleware (app.predict.fast_path) hands a request it cannot answer to the
    route, with its body replayed: it did so on any exception, so an answer that failed after
    the sinks ran was scored and logged a second time by the route. Now ``serve`` raises
    AnsweredError after the sinks ran, and the middleware lets it through (a 500, logged once).
    """
    with TestClient(app, raise_server_exceptions=False) as client:
        model_id = trained_model(client, worker)["id"]
        body = {"model_id": model_id, "instances": ROWS[:1]}
        assert client.post("/predict", json=body).status_code == 200  # cached: the fast path
        before = _logged(app)
        assert before == 1

        def broken(*_args, **_kwargs):  # noqa: ANN002, ANN003
            raise RuntimeError("the answer could not be encoded")

        monkeypatch.setattr(predict_service, "response_body", broken)
        r = client.post("/predict", json=body)
        assert r.status_code == 500
        assert _logged(app) == before + 1  # once: not again by the route
        monkeypatch.undo()
        r = client.post("/predict", json={**body, "instances": [[1.0, "x", 2.0]]})
        assert r.status_code == 422  # refused before the sinks: handed on, refused by the route
        assert _logged(app) == before + 1
        # the response made of the answer (the lane's render, after serve) fails alike
        monkeypatch.setattr(predict_service, "answered", broken)
        assert client.post("/predict", json=body).status_code == 500
        assert _logged(app) == before + 2  # once: not again by the route


class _Threads:
    """A sink that notes the thread each scored request was served on."""

    raw = False

    def __init__(self) -> None:
        self.names: list[str] = []

    def open(self, runtime, target):  # noqa: ANN001, ANN201
        return lambda _scored: self.names.append(threading.current_thread().name)


def test_every_door_serves_a_few_rows_of_a_held_model_on_the_loop(served, worker, clock):
    """The lanes are serve's policy, not /predict's (app.serving.lanes): inside the recheck
    window, a few rows for a model this process holds are answered on the event loop at
    /predict, /v2 and invocations alike; more rows go to the pool (anyio's worker threads)."""
    _registered(served, worker)
    for door in (_predict, _v2, _invocations):
        door(served)  # the name resolved, the model read and cached
    threads = _Threads()
    sinks.register(served.app.state.runtime, threads)
    for door in (_predict, _v2, _invocations):
        door(served)
    assert len(threads.names) == 3
    assert not [n for n in threads.names if n.startswith("AnyIO worker")], threads.names
    many = X[[0] * (lanes.INLINE_ROWS + 1)]
    body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": list(many.shape),
                        "data": many.reshape(-1).tolist()}]}
    assert served.post("/v2/models/credit/infer", json=body).status_code == 200
    r = served.post("/models/credit/invocations", json={"instances": many.tolist()})
    assert r.status_code == 200
    assert [n.startswith("AnyIO worker") for n in threads.names[3:]] == [True, True]


def test_every_door_says_how_many_rows_were_clipped(served, worker, clock):
    """One field added in the core (Scores.n_clipped) and in each door's encoder: /predict's
    ``n_clipped``, V2's ``parameters.n_clipped``, invocations' ``X-Rows-Clipped``."""
    _registered(served, worker)
    rows = [ROWS[0], [v * 100.0 for v in ROWS[1]]]  # the second far outside the training range
    predicted = served.post("/predict", json={"model": "credit", "instances": rows}).json()
    flags = [p["clipped"] for p in predicted["predictions"]]
    assert flags[1] is True and predicted["n_clipped"] == sum(flags)
    body = {"inputs": [{"name": "input", "datatype": "FP64", "shape": [2, 3],
                        "data": [v for row in rows for v in row]}]}
    r = served.post("/v2/models/credit/infer", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["parameters"]["n_clipped"] == sum(flags)
    r = served.post("/models/credit/invocations", json={"instances": rows})
    assert r.status_code == 200, r.text
    assert r.headers["X-Rows-Clipped"] == str(sum(flags))
