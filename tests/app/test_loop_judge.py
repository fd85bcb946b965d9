"""The retraining policy's judge (issue 48, app.loop.judge), round by round with a test clock:
with ``judge.canary_percent`` the challenger canaries in production (sticky by request key)
and is judged on its canary arm's own rows and their feedback — realised accuracy, the
label-free estimated accuracy and the cost under the production alias's decision rule, each
recomputed here from the answers /predict gave (an independent computation) — then promoted
(the promotion ends the canary); a worse challenger's canary is ended when it is rejected."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.app.loop_support import (
    NAME,
    POLICY,
    Service,
    feedback,
    flush,
    register_production,
    rows,
    started_service,
)
from tests.app.support import run_jobs

pytestmark = pytest.mark.postgres

COST_FP, COST_FN = 1.0, 3.0  # the production alias's rule: a missed "pos" costs three


@pytest.fixture
def service(settings, engine) -> Iterator[Service]:
    yield from started_service(settings, engine)


def _register_calibrated(svc: Service) -> None:
    register_production(svc, calibration="sigmoid")
    r = svc.client.post(f"/models/{NAME}@production/threshold",
                        json={"objective": {"cost_fp": COST_FP, "cost_fn": COST_FN}})
    assert r.status_code == 200, r.text


def _stream_in_requests(svc: Service, concept: str, n: int, seed: int, size: int = 4,
                        flipped: bool = False) -> list[dict]:
    """n rows through NAME@production in requests of ``size`` rows (each routed by its first
    id), fed back through the alias; each row's answer with its true label."""
    X, y = rows(concept, n, seed)
    answered = []
    for start in range(0, n, size):
        ids = [f"arm-{svc.counter + i}" for i in range(size)]  # (X-Request-ID: no key)
        svc.counter += size
        r = svc.client.post("/predict", json={"model": f"{NAME}@production", "ids": ids,
                                              "instances": X[start:start + size].tolist()})
        assert r.status_code == 200, r.text
        body = r.json()
        assert r.headers.get("X-Msvmav-Model-Arm") == body["arm"]
        for p, truth in zip(body["predictions"], y[start:start + size], strict=True):
            answered.append({**p, "arm": body["arm"], "version": body["version"],
                             "truth": str(truth)})
    labels = [a["truth"] for a in answered]
    if flipped:
        labels = ["neg" if t == "pos" else "pos" for t in labels]
    got = feedback(svc.client, [a["id"] for a in answered], labels, ref=f"{NAME}@production")
    assert got["matched"] == n  # the canary arm's rows too: the alias's feedback labels them
    for a, label in zip(answered, labels, strict=True):
        a["truth"] = label
    flush(svc.client)
    return answered


def _expected(answered: list[dict], arm: str) -> dict:
    """Rows, fed-back rows, accuracy and cost (1 per false "pos", 3 per missed "pos") on the
    fed-back ones, estimated accuracy (mean probability of the label given) of all, of one
    arm's rows, from the answers themselves."""
    mine = [a for a in answered if a["arm"] == arm]
    fed = [a for a in mine if a["truth"] is not None]
    right = [a["label"] == a["truth"] for a in fed]
    cost = [COST_FP if (a["label"], a["truth"]) == ("pos", "neg") else
            COST_FN if (a["label"], a["truth"]) == ("neg", "pos") else 0.0 for a in fed]
    return {"n": len(mine), "labelled": len(fed), "accuracy": float(np.mean(right)),
            "estimated_accuracy": float(np.mean([a["probabilities"][a["label"]]
                                                 for a in mine])),
            "cost": float(np.mean(cost))}


def _sticky(svc: Service) -> list[dict]:
    """One key, one arm, every time (the bare name is production's: its canary too); the
    answers (logged rows without feedback)."""
    answered = []
    for key in [f"key-{i}" for i in range(12)]:
        arms = set()
        for _ in range(3):
            r = svc.client.post("/predict", headers={"X-Msvmav-Route-Key": key},
                                json={"model": NAME, "instances": [[0.0, 0.0, 0.0]]})
            arms.add(r.headers["X-Msvmav-Model-Arm"])
            answered.append({**r.json()["predictions"][0], "arm": r.json()["arm"],
                             "version": r.json()["version"], "truth": None})
        assert len(arms) == 1, key
    assert {a["arm"] for a in answered} == {"primary", "canary"}
    return answered


def _history(svc: Service) -> list[dict]:
    return svc.client.get(f"/registered-models/{NAME}/history?limit=100").json()["items"]


def _canaries(svc: Service) -> dict:
    found = svc.client.get(f"/registered-models/{NAME}").json()["canaries"]
    return {alias: {"version": c["version"], "percent": c["percent"]}
            for alias, c in found.items()}


def test_the_canary_arm_is_judged_on_its_own_rows(service):
    svc = service
    _register_calibrated(svc)
    r = svc.client.put(POLICY, json={
        "trigger": {"min_new_labels": 100, "cooldown_seconds": 0},
        "judge": {"min_rows": 30, "margin": 0.05, "canary_percent": 25, "holdout_tolerance": 0.2},
        "action": "promote",
        "rollback": {"probation_seconds": 100, "min_rows": 1000}})
    assert r.status_code == 200, r.text
    assert r.json()["config"]["judge"]["canary_percent"] == 25
    svc.stream("B", 120, seed=1)
    assert svc.step()["state"]["phase"] == "retraining"
    assert run_jobs(svc.worker) == ["succeeded"]
    assert svc.step()["state"]["phase"] == "shadowing"
    assert _canaries(svc) == {"production": {"version": 2, "percent": 25.0}}
    start = _history(svc)[0]
    assert (start["alias"], start["action"], start["actor"]) == ("production", "canary", "policy")
    assert (start["to_canary"]["version"], start["to_canary"]["percent"]) == (2, 25.0)
    assert "answers 25 %" in start["reason"] and start["evidence"]["challenger_version"] == 2
    # the challenger alias got production's rule, refitted for its version (its shadow labels)
    assert any(m["alias"] == "challenger" and m["action"] == "rule" and m["to_rule"]
               for m in _history(svc))
    unlabelled = _sticky(svc)
    svc.restart()  # the API: the canary and the policy go on from the database
    answered = _stream_in_requests(svc, "B", 600, seed=2) + unlabelled
    canary, primary = _expected(answered, "canary"), _expected(answered, "primary")
    assert canary["labelled"] >= 30 and primary["labelled"] >= 30
    assert {a["version"] for a in answered if a["arm"] == "canary"} == {2}
    body = svc.step()
    assert body["state"]["phase"] == "probation", body["state"].get("last_decision")
    promotion = next(m for m in _history(svc) if m["alias"] == "production"
                     and m["action"] == "set")
    evidence = promotion["evidence"]
    assert (promotion["actor"], promotion["from_version"], promotion["to_version"]) == (
        "policy", 1, 2)
    assert evidence["source"] == "canary" and "canary arm" in promotion["reason"]
    for side, expected in (("challenger", canary), ("served", primary)):
        assert evidence["canary"][side]["n"] == expected["n"]
        assert evidence["canary"][side]["labelled"] == expected["labelled"]
        for figure in ("accuracy", "estimated_accuracy", "cost"):
            assert evidence[f"{side}_{figure}"] == pytest.approx(expected[figure], abs=1e-9), (
                side, figure)
    assert evidence["gain"] >= 0.05 and evidence["cost_change"] < 0
    assert "cost_fn" in evidence["cost_basis"]
    assert evidence["shadow"]["n"] > 0 and evidence["agreement"] is not None
    # the promotion ended the canary (PUT replaces the alias): recorded with the move
    assert _canaries(svc) == {} and promotion["from_canary"]["version"] == 2
    state = svc.step(100)["state"]
    assert state["last_decision"]["verdict"].startswith("kept")
    _worse_canary_is_ended(svc)


def _worse_canary_is_ended(svc: Service) -> None:
    svc.age_inputs()
    r = svc.client.put(POLICY, json={
        "trigger": {"min_new_labels": 80, "cooldown_seconds": 0},
        "retrain": {"include_dataset": False, "window_seconds": 3600},
        "judge": {"min_rows": 30, "margin": 0.0, "canary_percent": 25, "holdout_tolerance": 1},
        "action": "promote"})
    assert r.status_code == 200, r.text
    _stream_in_requests(svc, "B", 80, seed=3, flipped=True)  # wrong feedback
    assert svc.step()["state"]["phase"] == "retraining"
    assert run_jobs(svc.worker) == ["succeeded"]
    assert svc.step()["state"]["challenger_version"] == 3
    assert _canaries(svc) == {"production": {"version": 3, "percent": 25.0}}
    _stream_in_requests(svc, "B", 600, seed=4)
    state = svc.step()["state"]
    assert state["last_decision"]["verdict"] == "rejected", state
    assert state["last_decision"]["evidence"]["source"] == "canary"
    assert svc.aliases()["production"] == 2 and _canaries(svc) == {}
    end = _history(svc)[0]
    assert (end["alias"], end["action"], end["actor"], end["to_canary"]) == (
        "production", "canary", "policy", None)
    assert "rejected" in end["reason"]
    # undone by hand: a rollback of that move brings the canary back, recorded as the key's
    r = svc.client.post(f"/registered-models/{NAME}/aliases/production/rollback")
    assert r.status_code == 200, r.text
    assert _canaries(svc) == {"production": {"version": 3, "percent": 25.0}}
    assert _history(svc)[0]["actor"] is None
