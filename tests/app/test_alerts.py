"""Alert rules, webhooks and the monitoring gauges (issue 47), on both databases and with a
real HTTP receiver on 127.0.0.1 (tests.app.alert_support): a rule fires a signed webhook
within 5 s of the window that crosses it, a receiver answering 500 is retried, no second fire
inside the cool-down, the deliveries are listed, the gauges appear on /metrics; evaluators of
two processes never both evaluate a window or both fire; registry events reach their hooks."""

from __future__ import annotations

import json
import math
import socket
import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.alerts.evaluator import Evaluator
from app.alerts.orm import AlertRule
from app.core.db import make_engine
from app.core.runtime import Runtime
from app.jobs.worker import Worker
from app.main import create_app
from app.monitoring import report
from app.webhooks.orm import WebhookDelivery
from tests.app.alert_support import receiver, signature_ok, wait_for
from tests.app.auth_support import bearer, make_key
from tests.app.support import (
    blobs,
    job_finished,
    submit,
    to_csv,
    trained_model,
    upload,
)

# The database matters here (conditional UPDATEs, JSON, timestamps): the PostgreSQL twin runs.
pytestmark = pytest.mark.postgres

WINDOW = 2  # seconds: a short window, so that one ends soon after the rows are predicted


@pytest.fixture
def fast(settings, engine):
    """A client whose evaluator and dispatcher look every 0.1 s, retries after 0.2 s."""
    quick = settings.model_copy(update={"alert_interval_seconds": 0.1,
                                        "webhook_retry_base_seconds": 0.2,
                                        "webhook_max_attempts": 3})
    with TestClient(create_app(quick)) as c:
        yield c


def _clipped_rows(n: int = 20) -> list[list[float]]:
    X, _ = blobs(n=n, seed=5)
    X[:, 0] = 1e6  # every row outside the training range: clipped
    return X.tolist()


def _window_end(t: float, seconds: int) -> float:
    return (math.floor(t / seconds) + 1) * seconds


def _rule(client, model_id: int, **extra) -> dict:
    body = {"model_id": model_id, "metric": "clipped_share", "comparison": "gt", "level": 0.5,
            "window_seconds": WINDOW, "cooldown_seconds": 3600, **extra}
    r = client.post("/alert-rules", json=body)
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/alert-rules/{r.json()['id']}"
    return r.json()


def _hook(client, url: str, events: list[str]) -> dict:
    r = client.post("/webhooks", json={"url": url, "events": events})
    assert r.status_code == 201, r.text
    assert r.json()["secret"].startswith("whsec_")
    return r.json()


def test_a_crossing_window_fires_a_signed_webhook_retried_once_in_its_cooldown(fast, worker):
    model = trained_model(fast, worker)
    with receiver(answers=[500]) as hook_server:
        hook = _hook(fast, hook_server.url, ["alert"])
        assert "secret" not in fast.get(f"/webhooks/{hook['id']}").json()  # shown once
        rule = _rule(fast, model["id"])
        r = fast.post("/predict", json={"model_id": model["id"], "instances": _clipped_rows()})
        assert r.status_code == 200 and all(p["clipped"] for p in r.json()["predictions"])
        crossing_end = _window_end(time.time(), WINDOW)

        first, second = hook_server.wait(2)  # the 500, then the retry
        assert first.at - crossing_end <= 5.0, first.at - crossing_end
        assert (first.answered, second.answered) == (500, 200)
        assert first.body == second.body  # the same event, signed afresh at each attempt
        for got in (first, second):
            assert signature_ok(hook["secret"], got)
            assert not signature_ok("whsec_another", got)
            assert got.headers["msvmav-event"] == "alert"
        event = json.loads(first.body)
        assert event["type"] == "alert" and event["data"]["rule"]["id"] == rule["id"]
        assert event["data"]["value"] == 1.0 and event["data"]["window"]["model_id"] == model["id"]

        # the deliveries and each attempt's answer, listed
        deliveries = wait_for(lambda: [d for d in fast.get(
            "/webhook-deliveries", params={"rule_id": rule["id"]}).json()
            if d["status"] == "delivered"], what="a delivered delivery")
        assert len(deliveries) == 1
        (d,) = deliveries
        assert d["attempts"] == 2 and d["response_code"] == 200
        assert [a["status_code"] for a in d["history"]] == [500, 200]
        assert d["body"].encode() == first.body and d["webhook_id"] == hook["id"]

        # a later window crosses too: evaluated, inside the cool-down, not fired
        again = fast.post("/predict", json={"model_id": model["id"],
                                            "instances": _clipped_rows()})
        assert again.status_code == 200
        later_end = _window_end(time.time(), WINDOW)

        def evaluated() -> dict | None:
            body = fast.get(f"/alert-rules/{rule['id']}").json()
            until = body["evaluated_until"]
            done = until and _epoch(until) >= later_end
            return body if done and body["last_window"]["values"]["rows"] else None

        seen = wait_for(evaluated, what="the later window evaluated")
        assert seen["last_window"]["values"]["clipped_share"] == 1.0  # it crossed
        assert len(hook_server.got) == 2
        assert len(fast.get("/webhook-deliveries").json()) == 1

    # the same window's values as gauges on /metrics
    text = fast.get("/metrics").text
    labels = f'model="{model["id"]}",target="{model["id"]}"'
    assert f"msvmav_monitoring_clipped_share{{{labels}}} 1.0" in text
    assert "# TYPE msvmav_monitoring_estimated_accuracy gauge" in text
    assert f"msvmav_monitoring_window_rows{{{labels}}} " in text


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_two_processes_never_both_evaluate_a_window_nor_fire_twice(settings, engine, worker):
    """Two runtimes on one database (as two API processes): their evaluators race for the
    same window; one evaluates it and fires; the next window is inside the cool-down."""
    quiet = settings.model_copy(update={"alerts": False})  # the evaluators run by hand here
    with TestClient(create_app(quiet)) as client:
        model = trained_model(client, worker)
        _hook(client, "http://127.0.0.1:9/never", ["alert"])
        rule = _rule(client, model["id"], window_seconds=3600)
        t = time.time()
        assert client.post("/predict", json={"model_id": model["id"],
                                             "instances": _clipped_rows()}).status_code == 200
        runtimes = [Runtime(make_engine(settings.database_url), quiet) for _ in range(2)]
        end = _window_end(t, 3600)
        wait_for(lambda: _logged(engine, model["id"]) == 20, what="the rows logged")
        fired: list[int] = []
        start = threading.Barrier(2)

        def race(rt: Runtime, now: float) -> None:
            start.wait()
            fired.append(Evaluator(rt).run_once(now))

        try:
            for now in (end + 1.5, end + 3600 + 1.5):  # this window, then the next
                threads = [threading.Thread(target=race, args=(rt, now)) for rt in runtimes]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
        finally:
            for rt in runtimes:
                rt.close()
        assert sorted(fired) == [0, 0, 0, 1]
        with Session(engine) as s:
            assert s.scalar(select(func.count()).select_from(WebhookDelivery)) == 1
        assert client.get(f"/alert-rules/{rule['id']}").json()["last_fired_at"] is not None


def test_rules_on_one_model_and_window_share_one_report(settings, engine, worker, monkeypatch):
    """Three rules on one model and window, a fourth on a longer window: one round computes
    two monitoring reports (one per window), and the three rules keep the same values."""
    quiet = settings.model_copy(update={"alerts": False})  # the evaluator runs by hand here
    with TestClient(create_app(quiet)) as client:
        model = trained_model(client, worker)
        same = [_rule(client, model["id"], metric=m, window_seconds=3600)["id"]
                for m in ("clipped_share", "rows", "drift_statistic")]
        _rule(client, model["id"], window_seconds=7200)
        t = time.time()
        assert client.post("/predict", json={"model_id": model["id"],
                                             "instances": _clipped_rows()}).status_code == 200
        wait_for(lambda: _logged(engine, model["id"]) == 20, what="the rows logged")
        computed: list[tuple] = []
        real = report.model_report

        def counted(session, model_id, since, until, *args, **kwargs):
            computed.append((model_id, since, until))
            return real(session, model_id, since, until, *args, **kwargs)

        monkeypatch.setattr(report, "model_report", counted)  # the real report, counted
        runtime = Runtime(make_engine(settings.database_url), quiet)
        try:
            Evaluator(runtime).run_once(_window_end(t, 3600) + 1.5)
        finally:
            runtime.close()
        assert len(computed) == 2 and len({c[1:] for c in computed}) == 2, computed
        with Session(engine) as s:
            kept = [s.get(AlertRule, i).last_window for i in same]
        assert kept[0]["values"]["rows"] == 20.0 and kept[0]["values"]["clipped_share"] == 1.0
        assert kept[1] == kept[0] and kept[2] == kept[0]


def test_worker_processes_do_not_evaluate_rules(settings, engine, worker, alert_clock):
    """Only API processes evaluate: a rule of 1 s windows stays unevaluated while a worker's
    loop (what ``msvmav worker`` runs: ``Worker.run_forever``, alerts on as by default) runs a
    job and the evaluators' clock steps three windows past (tests.app.alert_clock: any
    evaluator of this process would have made its round by ``settle``)."""
    quiet = settings.model_copy(update={"alerts": False})  # the API evaluates nothing here
    with TestClient(create_app(quiet)) as client:
        model = trained_model(client, worker)
        rule = _rule(client, model["id"], window_seconds=1)
        loop = Worker(settings.model_copy(update={"alerts": True,
                                                  "alert_interval_seconds": 0.1}),
                      engine=engine)
        thread = threading.Thread(target=loop.run_forever, name="test-worker-loop")
        thread.start()
        try:
            X, y = blobs(n=60, seed=3)
            job = submit(client, upload(client, to_csv(X, y))["id"], max_iter=20)
            assert job_finished(client, job["id"])["status"] == "succeeded"  # the loop ran it
            alert_clock.advance(3.5)  # three windows end meanwhile
            alert_clock.settle()
            paused = alert_clock.paused()
            body = client.get(f"/alert-rules/{rule['id']}").json()
            evaluators = [t for t in threading.enumerate() if t.name == "msvmav-alert-evaluator"]
        finally:
            loop.stop()
            thread.join(timeout=30)
        assert body["evaluated_until"] is None and body["last_window"] is None
        assert evaluators == [] and paused == 0


def test_the_alert_clock_steps_an_evaluators_windows(fast, worker, alert_clock):
    """The absence test's control: an API process's evaluator pauses on the test's clock and,
    once it is stepped a window past, has evaluated that window by ``settle``."""
    model = trained_model(fast, worker)
    rule = _rule(fast, model["id"], window_seconds=1)
    wait_for(lambda: alert_clock.paused() == 1, what="the evaluator paused on the clock")
    alert_clock.settle()
    before = fast.get(f"/alert-rules/{rule['id']}").json()["evaluated_until"]
    alert_clock.advance(3.5)
    alert_clock.settle()
    body = fast.get(f"/alert-rules/{rule['id']}").json()
    assert body["evaluated_until"] != before
    assert _epoch(body["evaluated_until"]) == math.floor(alert_clock() - 1.0)
    assert body["last_window"]["values"]["rows"] == 0.0


def _logged(engine, model_id: int) -> int:
    from app.monitoring.orm import PredictionLog

    with Session(engine) as s:
        return s.scalar(select(func.count()).where(PredictionLog.model_id == model_id))


def test_registry_events_reach_the_hooks_that_take_them(fast, worker):
    model = trained_model(fast, worker)
    with receiver() as hook_server:
        hook = _hook(fast, hook_server.url, ["version_registered", "alias_moved"])
        _hook(fast, hook_server.url + "/alerts-only", ["alert"])
        assert fast.post("/registered-models", json={"name": "credit"}).status_code == 201
        r = fast.post("/registered-models/credit/versions", json={"model_id": model["id"]})
        assert r.status_code == 201, r.text
        r = fast.put("/registered-models/credit/aliases/production", json={"version": 1})
        assert r.status_code == 200, r.text
        got = hook_server.wait(2)
        assert all(signature_ok(hook["secret"], g) for g in got)
        assert all(g.headers.get("msvmav-event") for g in got)
        events = sorted((json.loads(g.body) for g in got), key=lambda e: e["type"])
        assert [e["type"] for e in events] == ["alias_moved", "version_registered"]
        moved, registered = (e["data"] for e in events)
        assert registered == {"registered_model": "credit", "version": 1,
                              "model_id": model["id"]}
        assert (moved["alias"], moved["from_version"], moved["to_version"]) == (
            "production", None, 1)
        deliveries = fast.get("/webhook-deliveries", params={"webhook_id": hook["id"]}).json()
        assert len(deliveries) == 2 and len(hook_server.got) == 2  # none to the alerts-only hook


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_receiver_that_never_answers_is_retried_with_backoff_then_failed(fast, worker):
    model = trained_model(fast, worker)
    hook = _hook(fast, f"http://127.0.0.1:{_closed_port()}/hook", ["version_registered"])
    fast.post("/registered-models", json={"name": "credit"})
    assert fast.post("/registered-models/credit/versions",
                     json={"model_id": model["id"]}).status_code == 201
    (d,) = wait_for(lambda: [d for d in fast.get("/webhook-deliveries").json()
                             if d["status"] == "failed"], what="the delivery failed")
    assert d["webhook_id"] == hook["id"] and d["attempts"] == 3 and d["response_code"] is None
    assert all(a["status_code"] is None and "Connect" in a["error"] for a in d["history"])
    at = [_epoch(a["at"]) for a in d["history"]]
    # the waits double from webhook_retry_base_seconds (0.2 s): 0.2 s, then 0.4 s at least
    assert at[1] - at[0] >= 0.2 and at[2] - at[1] >= 0.4, at


def test_rules_and_hooks_crud_and_bad_input_name_the_field(client, worker):
    model = trained_model(client, worker)
    rule = _rule(client, model["id"])
    assert client.get("/alert-rules").json()[0]["id"] == rule["id"]
    r = client.patch(f"/alert-rules/{rule['id']}", json={"level": 0.25, "enabled": False})
    assert r.status_code == 200 and (r.json()["level"], r.json()["enabled"]) == (0.25, False)
    assert r.json()["metric"] == "clipped_share"  # kept
    bad = [
        ({"metric": "accuracy"}, "metric"),
        ({"comparison": "=="}, "comparison"),
        ({"window_seconds": 0}, "window_seconds"),
        ({"cooldown_seconds": -1}, "cooldown_seconds"),
        ({"level": "high"}, "level"),
        ({"model": "credit@production"}, "model_id"),  # both targets
        ({"colour": "red"}, "colour"),
    ]
    base = {"model_id": model["id"], "metric": "clipped_share", "comparison": "gt",
            "level": 0.5}
    for change, field in bad:
        r = client.post("/alert-rules", json=base | change)
        assert r.status_code == 422, (change, r.text)
        assert field in {e["loc"][-1] for e in r.json()["errors"]}, (change, r.json())
    r = client.post("/alert-rules", json=base | {"model_id": 2**31 - 2})  # no such model: 404
    assert r.status_code == 404 and r.json()["errors"][0]["loc"] == ["body", "model_id"], r.text
    no_target = {k: v for k, v in base.items() if k != "model_id"}
    r = client.post("/alert-rules", json=no_target)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "model_id"]
    r = client.post("/alert-rules", json=no_target | {"model": "nope@production"})
    assert r.status_code == 404, r.text
    r = client.patch(f"/alert-rules/{rule['id']}", json={"window_seconds": 10**9})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"][-1] == "window_seconds"
    for body, field in (({"url": "ftp://x", "events": ["alert"]}, "url"),
                        ({"url": "http://127.0.0.1/", "events": []}, "events"),
                        ({"url": "http://127.0.0.1/", "events": ["deploy"]}, "events"),
                        # stored and sent each delivery: bounded (a 70,000-character URL was 201)
                        ({"url": "http://127.0.0.1/" + "a" * 2100, "events": ["alert"]}, "url")):
        r = client.post("/webhooks", json=body)
        assert r.status_code == 422 and field in r.json()["errors"][0]["loc"], r.text
    hook = _hook(client, "http://127.0.0.1:9/h", ["alert"])
    listed = client.get("/webhooks").json()
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
    assert client.delete(f"/webhooks/{hook['id']}").status_code == 204
    assert client.get(f"/webhooks/{hook['id']}").status_code == 404
    assert client.delete(f"/alert-rules/{rule['id']}").status_code == 204
    assert client.get(f"/alert-rules/{rule['id']}").status_code == 404
    r = client.get("/webhook-deliveries", params={"limit": 0})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "limit"]


ROUTES = [
    ("GET", "/alert-rules", "read"), ("POST", "/alert-rules", "write"),
    ("GET", "/alert-rules/{rule}", "read"), ("PATCH", "/alert-rules/{rule}", "write"),
    ("DELETE", "/alert-rules/{rule}", "write"),
    ("GET", "/webhooks", "read"), ("POST", "/webhooks", "admin"),
    ("GET", "/webhooks/{hook}", "read"), ("DELETE", "/webhooks/{hook}", "admin"),
    ("GET", "/webhook-deliveries", "read"),
]


def test_every_alert_route_needs_its_scope(keyed, engine, worker):
    """A read key reads and is refused each change (403); a write key changes the rules, an
    admin key the webhooks; no key: 401."""
    admin = make_key(engine, "admin")
    keyed.headers.update(bearer(admin))
    model = trained_model(keyed, worker)
    keys = {scope: bearer(make_key(engine, scope)) for scope in ("read", "write")}
    bodies = {"/alert-rules": {"model_id": model["id"], "metric": "rows", "comparison": "ge",
                               "level": 1},
              "/webhooks": {"url": "http://127.0.0.1:9/h", "events": ["alert"]}}
    rule = _rule(keyed, model["id"])
    hook = _hook(keyed, "http://127.0.0.1:9/h", ["alert"])
    keyed.headers.pop("Authorization")
    for method, template, needed in ROUTES:
        path = template.format(rule=rule["id"], hook=hook["id"])
        body = bodies.get(path) if method == "POST" else (
            {"level": 0.3} if method == "PATCH" else None)
        assert keyed.request(method, path, json=body).status_code == 401, (method, path)
        r = keyed.request(method, path, json=body, headers=keys["read"])
        if needed != "read":
            assert r.status_code == 403 and r.json()["required_scope"] == needed, r.text
        else:
            assert r.status_code == 200, (method, path, r.text)
        r = keyed.request(method, path, json=body, headers=keys["write"])
        if needed == "admin":  # a webhook sends to any URL: an admin key adds or deletes one
            assert r.status_code == 403 and r.json()["required_scope"] == "admin", r.text
            r = keyed.request(method, path, json=body, headers=bearer(admin))
        assert r.status_code in (200, 201, 204), (method, path, r.text)
