"""Retraining policies (issue 48), driven round by round with a test clock (no evaluator
thread: MSVMAV_ALERTS=false, ``policies.run_once(runtime, now)``), with the API (a new app on
the same database) and the worker restarted between the rounds: an alert fires on shifted
live rows, the policy retrains warm-started, shadows the challenger, promotes it once it wins
on N fed-back rows; a deliberately worse challenger (trained on wrongly fed-back rows) is never
promoted; a promoted challenger that then loses is rolled back; each move in the alias history
with its reason and evidence, and a move by hand still works after them."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.alerts.evaluator import Evaluator
from app.loop import policies
from app.main import create_app
from tests.app.loop_support import (
    NAME,
    POLICY,
    Service,
    predict,
    register_production,
    rows,
    started_service,
)
from tests.app.support import assert_problem, run_jobs

pytestmark = pytest.mark.postgres


@pytest.fixture
def service(settings, engine) -> Iterator[Service]:
    yield from started_service(settings, engine)


def _alert_rule(svc: Service) -> dict:
    """An alert rule on the drift of production's decision values over an hour (an
    uncalibrated model has no accuracy estimate)."""
    r = svc.client.post("/alert-rules", json={
        "model": f"{NAME}@production", "metric": "drift_p_value", "comparison": "lt",
        "level": 0.001, "window_seconds": 3600, "cooldown_seconds": 0, "min_rows": 50})
    assert r.status_code == 201, r.text
    return r.json()


def _history(svc: Service) -> list[dict]:
    return svc.client.get(f"/registered-models/{NAME}/history?limit=100").json()["items"]


def test_the_loop_promotes_rejects_and_rolls_back(service):
    svc = service
    register_production(svc)
    rule = _alert_rule(svc)
    r = svc.client.put(POLICY, json={
        "trigger": {"alert_rule_ids": [rule["id"]], "cooldown_seconds": 0},
        "judge": {"min_rows": 80, "margin": 0.05}, "action": "promote",
        "rollback": {"probation_seconds": 10_000, "margin": 0.05, "min_rows": 80}})
    assert r.status_code == 200, r.text
    assert svc.step()["state"]["phase"] == "idle"  # no fire yet
    svc.stream("B", 210, seed=1)  # the concept moved: production answers half of them wrong
    end = math.ceil(time.time() / 3600) * 3600
    assert Evaluator(svc.client.app.state.runtime).run_once(now=end + 2) == 1
    state = svc.step()["state"]
    assert state["phase"] == "retraining" and "alert rule" in state["trigger"]
    svc.restart()
    assert run_jobs(svc.worker) == ["succeeded"]
    state = svc.step()["state"]
    assert state["phase"] == "shadowing" and state["challenger_version"] == 2
    lineage = svc.client.get(f"/registered-models/{NAME}").json()["versions"][0]["lineage"]
    assert lineage["feedback_rows"] == 210 and lineage["warm_start"]["applied"] == "linear"
    svc.stream("B", 100, seed=3)  # production answers, the challenger shadows
    svc.restart()
    body = svc.step()
    assert body["state"]["phase"] == "probation", body
    assert svc.aliases() == {"challenger": 2, "previous": 1, "production": 2}
    promotion = next(m for m in _history(svc) if m["alias"] == "production")
    assert (promotion["actor"], promotion["from_version"], promotion["to_version"]) == (
        "policy", 1, 2)
    evidence = promotion["evidence"]
    assert evidence["labelled"] >= 80 and "promoted" in promotion["reason"]
    assert evidence["challenger_accuracy"] - evidence["served_accuracy"] >= 0.05
    _check_record(svc, evidence)
    # the probation: the replaced version (shadowing) does worse: production is kept
    svc.stream("B", 100, seed=4)
    assert svc.step()["state"]["phase"] == "probation"
    state = svc.step(10_000)["state"]
    assert state["phase"] == "idle" and state["last_decision"]["verdict"].startswith("kept")
    _worse_challenger_is_rejected(svc)
    _promoted_then_rolled_back(svc)


def _check_record(svc: Service, evidence: dict) -> None:
    """The evidence's accuracies, recomputed from /predict of each version on the streamed
    rows (an independent computation): both within one row's share of them."""
    X, y = rows("B", 100, seed=3)
    for side, version in (("challenger", 2), ("served", 1)):
        labels = predict(svc.client, X, [f"check-{side}-{i}" for i in range(100)],
                         ref=f"{NAME}/{version}")
        assert abs(np.mean(np.asarray(labels) == y) - evidence[f"{side}_accuracy"]) < 0.02


def _worse_challenger_is_rejected(svc: Service) -> None:
    svc.age_inputs()
    r = svc.client.put(POLICY, json={
        "trigger": {"min_new_labels": 60, "cooldown_seconds": 0},
        "retrain": {"include_dataset": False, "window_seconds": 3600},
        "judge": {"min_rows": 80, "margin": 0.05}, "action": "promote",
        "rollback": {"probation_seconds": 10_000, "margin": 0.05, "min_rows": 80}})
    assert r.status_code == 200, r.text
    svc.stream("B", 80, seed=5, flipped=True)  # wrong feedback: the challenger learns it
    state = svc.step()["state"]
    assert state["phase"] == "retraining" and "new fed-back rows" in state["trigger"]
    svc.restart()
    assert run_jobs(svc.worker) == ["succeeded"]
    assert svc.step()["state"]["challenger_version"] == 3
    svc.stream("B", 100, seed=6)
    state = svc.step()["state"]
    assert state["last_decision"]["verdict"] == "rejected" and state["rejected_versions"] == [3]
    assert svc.aliases()["production"] == 2  # never promoted
    assert not any(m["to_version"] == 3 and m["alias"] == "production" for m in _history(svc))


def _promoted_then_rolled_back(svc: Service) -> None:
    svc.age_inputs()
    svc.stream("C", 80, seed=7)  # a new concept: only its rows are in the window
    assert svc.step()["state"]["phase"] == "retraining"
    svc.restart()
    assert run_jobs(svc.worker) == ["succeeded"]
    assert svc.step()["state"]["challenger_version"] == 4
    svc.stream("C", 100, seed=8)
    assert svc.step()["state"]["phase"] == "probation"
    assert svc.aliases()["production"] == 4
    svc.stream("B", 100, seed=9)  # the concept goes back: the promoted version loses
    svc.restart()
    state = svc.step()["state"]
    assert state["last_decision"]["verdict"] == "rolled back", state
    assert svc.aliases()["production"] == 2
    back = _history(svc)[0]
    assert (back["alias"], back["action"], back["actor"]) == ("production", "rollback", "policy")
    assert (back["from_version"], back["to_version"]) == (4, 2)
    assert back["evidence"]["loss"] >= 0.05 and "rolled back" in back["reason"]
    # undone by hand: a person moves production back to 4, recorded as theirs
    r = svc.client.put(f"/registered-models/{NAME}/aliases/production", json={"version": 4})
    assert r.status_code == 200 and _history(svc)[0]["actor"] is None


def test_register_only_records_the_verdict(service):
    svc = service
    register_production(svc)
    r = svc.client.put(POLICY, json={"trigger": {"min_new_labels": 50, "cooldown_seconds": 0},
                                     "judge": {"min_rows": 50}, "action": "register"})
    assert r.status_code == 200, r.text
    svc.stream("B", 60, seed=1)
    assert svc.step()["state"]["phase"] == "retraining"
    assert run_jobs(svc.worker) == ["succeeded"]
    svc.step()
    svc.stream("B", 60, seed=2)
    body = svc.step()
    assert body["state"]["last_decision"]["verdict"] == "wins"
    assert svc.aliases() == {"challenger": 2, "production": 1}  # nothing else moved


def test_two_processes_step_a_policy_once_per_round(service, settings):
    svc = service
    register_production(svc)
    svc.client.put(POLICY, json={"trigger": {"min_new_labels": 10, "cooldown_seconds": 0}})
    svc.stream("B", 20, seed=1)
    other = TestClient(create_app(svc.settings))
    with other:
        now = svc.now + 5
        done = [policies.run_once(c.app.state.runtime, now) for c in (svc.client, other)]
    assert sorted(done) == [0, 1]
    assert run_jobs(svc.worker) == ["succeeded"]  # one retrain job, not two


@pytest.mark.parametrize(("body", "field"), [
    ({"action": "deploy"}, "action"),
    ({"trigger": {"alert_rule_ids": [999]}}, "trigger.alert_rule_ids[0]"),
    ({"trigger": {"schedule_seconds": 1}}, "trigger.schedule_seconds"),
    ({"judge": {"margin": 2}}, "judge.margin"),
    ({"judge": {"challenger_alias": "production"}}, None),
    ({"rollback": {"min_rows": 0}}, "rollback.min_rows"),
    ({"retrain": {"search": "bogus"}}, None),
    ({"unknown": 1}, "unknown"),
])
def test_policy_refuses_bad_bodies(service, body, field):
    register_production(service)
    assert_problem(service.client.put(POLICY, json=body), 422, field)


def test_policy_of_an_unknown_model_or_none_is_404(service):
    assert service.client.put("/registered-models/ghost/policy", json={}).status_code == 404
    register_production(service)
    assert service.client.get(POLICY).status_code == 404
    assert service.client.delete(POLICY).status_code == 404
    assert service.client.put(POLICY, json={}).status_code == 200
    assert service.client.delete(POLICY).status_code == 204


def test_the_schedule_triggers_a_retrain_then_waits_its_period(service):
    svc = service
    register_production(svc)
    r = svc.client.put(POLICY, json={"trigger": {"schedule_seconds": 600, "cooldown_seconds": 0},
                                     "judge": {"min_rows": 10}, "action": "register"})
    assert r.status_code == 200, r.text
    state = svc.step()["state"]  # never retrained: the schedule is due at once
    assert state["phase"] == "retraining" and state["trigger"] == "the schedule (every 600 s)"
    assert run_jobs(svc.worker) == ["succeeded"]
    assert svc.step()["state"]["phase"] == "shadowing"
    svc.stream("B", 20, seed=1)
    assert svc.step()["state"]["phase"] == "idle"  # judged (register only)
    assert svc.step(500)["state"]["phase"] == "idle"  # 5 + 5 + 500 s: not due yet
    state = svc.step(100)["state"]
    assert state["phase"] == "retraining" and state["job_id"] != 1
