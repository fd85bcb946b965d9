"""Issue 48's "Done when", end to end with real processes on real data (process tier):
``msvmav serve`` (the API, its alert evaluator stepping the policy every 0.2 s, its embedded
worker processes) on SQLite and PostgreSQL, stopped and started again between the phases.

The data: MAGIC gamma telescope rows (/work/shared/datasets/magic04.data, a seeded sample of
4,000), sorted by the feature fSize, so that the stream moves away from the rows production
was trained on (the smallest 400): a real covariate shift, mid-stream. Every label arrives
through POST /feedback by the alias.

1. The shifted rows trip an alert rule (most of a window's rows outside production's training
   range: the share its scaling clipped; the decision values' KS test did not see it); the policy
   retrains on the training rows + the fed-back ones, warm-started from production.
2. The challenger shadows production and canaries at 10 % (sticky: a key keeps its arm across
   requests and a restart); judged on its canary arm's fed-back rows it wins and is promoted.
3. A challenger retrained on wrongly fed-back rows canaries, loses, is never promoted.
Each move is in the alias history with actor ``policy``, its reason and its evidence, and the
last one is undone by hand. (The rollback of a promoted version that then loses runs
round by round in tests/app/test_loop_policy.py: a real-data scenario for it, a version trained
on the far end of the stream alone, did not beat production on its canary rows.)
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlalchemy import create_engine, update

from app.monitoring.orm import PredictionInput
from tests.app.loop_support import LiveSite, running_site
from tests.app.support import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.process, pytest.mark.slow]
BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get("TEST_DATABASE_URL") else [])
NAME = "magic"
DATA = Path(__file__).resolve().parents[2] / "../shared/datasets/magic04.data"
COLUMNS = ["fLength", "fWidth", "fSize", "fConc", "fConc1", "fAsym", "fM3Long", "fM3Trans",
           "fAlpha", "fDist"]
ENV = {"MSVMAV_ALERT_INTERVAL_SECONDS": "0.2", "MSVMAV_SERVE_RECHECK_SECONDS": "0"}
MIN_ROWS = 30
PER_REQUEST = 3  # rows per request: each request is routed (by its first id) to one arm


def magic() -> tuple[np.ndarray, np.ndarray]:
    """4,000 rows (seeded sample), sorted by fSize."""
    if not DATA.exists():
        pytest.skip(f"{DATA} is not here")
    raw = np.genfromtxt(DATA, delimiter=",", dtype=str)
    rows = raw[np.random.default_rng(0).permutation(len(raw))[:4000]]
    X, y = rows[:, :-1].astype(np.float64), rows[:, -1]
    order = np.argsort(X[:, COLUMNS.index("fSize")], kind="stable")
    return X[order], y[order]


def csv(X: np.ndarray, y: np.ndarray) -> bytes:
    lines = [",".join([*COLUMNS, "class"])]
    lines += [",".join([*(repr(float(v)) for v in row), str(c)]) for row, c in zip(X, y,
                                                                                 strict=True)]
    return ("\n".join(lines) + "\n").encode()


class Site(LiveSite):
    """``msvmav serve`` on one database, restartable; the stream's rows and their ids."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        super().__init__(tmp_path, url, ENV)
        self.X, self.y = magic()

    def call(self, method: str, path: str, body=None, **kw) -> httpx.Response:
        return self.response(method, path, body, **kw)

    def get(self, path: str):
        return self.call("GET", path).json()

    def stream(self, rows: slice, per_request: int = PER_REQUEST,
               flipped: bool = False) -> list[dict]:
        """The rows through NAME@production, ``per_request`` a request, then fed back through
        the alias (their labels swapped: wrong); each request's arm and version."""
        X, y = self.X[rows], self.y[rows]
        answers, ids = [], []
        for start in range(0, len(X), per_request):
            chunk = [f"live-{self.count + i}" for i in range(len(X[start:start + per_request]))]
            self.count += len(chunk)
            body = self.call("POST", "/predict", {
                "model": f"{NAME}@production", "ids": chunk,
                "instances": X[start:start + per_request].tolist()}).json()
            answers.append({"arm": body["arm"], "version": body["version"]})
            ids += chunk
        labels = np.where(y == "g", "h", "g") if flipped else y
        # the log is written off the request path: every id is matched once it is
        wait_for(lambda: self.call("POST", "/feedback", {
            "model": f"{NAME}@production", "ids": ids, "labels": labels.tolist()}).json()[
            "matched"] == len(ids), timeout=60, interval=0.2)
        return answers

    def policy(self) -> dict:
        return self.get(f"/registered-models/{NAME}/policy")

    def until(self, predicate, timeout: float = 240.0) -> dict:
        return wait_for(lambda: (s := self.policy()["state"]) and predicate(s) and s,
                        timeout=timeout, interval=0.2)

    def judged(self, segment: range) -> dict:
        """Stream the segment's rows with the policy paused, then let it judge them: the rows
        judged are the same whatever the processes' timing."""
        decided = self.policy()["state"].get("last_decision")
        self.enable(False)
        self.stream(slice(segment.start, segment.stop))
        self.enable(True)
        return self.until(lambda s: s.get("last_decision") != decided)

    def enable(self, enabled: bool) -> None:
        config = self.policy()["config"]
        self.call("PUT", f"/registered-models/{NAME}/policy", {**config, "enabled": enabled})

    def aliases(self) -> dict:
        return self.get(f"/registered-models/{NAME}")["aliases"]

    def canaries(self) -> dict:
        found = self.get(f"/registered-models/{NAME}")["canaries"]
        return {a: (c["version"], c["percent"]) for a, c in found.items()}

    def history(self) -> list[dict]:
        return self.get(f"/registered-models/{NAME}/history?limit=100")["items"]

    def age_inputs(self) -> None:
        """The rows kept so far logged a day ago, so that a windowed retrain and the policy's
        count of new fed-back rows start afresh (a test clock for the window)."""
        engine = create_engine(self.url)
        with engine.begin() as conn:
            conn.execute(update(PredictionInput).values(
                created_at=datetime.now(UTC) - timedelta(days=1)))
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def site(request, tmp_path):
    yield from running_site(Site, request.param, tmp_path)


def _policy(site: Site, **trigger) -> None:
    site.call("PUT", f"/registered-models/{NAME}/policy", {
        "trigger": {"cooldown_seconds": 0, **trigger},
        "retrain": {"include_dataset": "alert_rule_ids" in trigger,
                    **({} if "alert_rule_ids" in trigger else {"window_seconds": 3600})},
        "judge": {"min_rows": MIN_ROWS, "margin": 0.05, "canary_percent": 10,
                  "holdout_tolerance": 1.0},
        "action": "promote",
        "rollback": {"probation_seconds": 5 if "alert_rule_ids" in trigger else 3600,
                     "margin": 0.03, "min_rows": MIN_ROWS}})


def _move(site: Site, **match) -> dict:
    return next(m for m in site.history() if all(m[k] == v for k, v in match.items()))


def test_the_loop_end_to_end_on_shifted_real_data(site):
    ds = site.call("POST", "/datasets", files={
        "file": ("magic.csv", csv(site.X[:400], site.y[:400]))}).json()
    job = site.call("POST", "/train", {"dataset_id": ds["id"], "kernel": "linear",
                                       "calibration": "sigmoid", "register_as": NAME}).json()
    wait_for(lambda: site.get(f"/jobs/{job['id']}")["status"] == "succeeded", timeout=180,
             interval=0.2)
    site.call("PUT", f"/registered-models/{NAME}/aliases/production", {"version": 1})
    rule = site.call("POST", "/alert-rules", {
        "model": f"{NAME}@production", "metric": "clipped_share", "comparison": "gt",
        "level": 0.5, "window_seconds": 2, "cooldown_seconds": 0, "min_rows": 50}).json()
    _policy(site, alert_rule_ids=[rule["id"]])
    # 1. the shift: the alert fires, the policy retrains on training + fed-back rows
    site.stream(slice(2000, 2600), per_request=600)
    state = site.until(lambda s: s["phase"] in ("retraining", "shadowing"))
    assert f"alert rule {rule['id']}" in state["trigger"]
    site.restart()  # the API and its worker processes: the job and the policy go on
    state = site.until(lambda s: s["phase"] == "shadowing")
    assert state["challenger_version"] == 2
    lineage = site.get(f"/registered-models/{NAME}")["versions"][0]["lineage"]
    assert (lineage["parent_version"], lineage["dataset_rows"], lineage["feedback_rows"]) == (
        1, 400, 600)
    assert lineage["warm_start"]["applied"] == "linear"
    # 2. the challenger shadows and canaries at 10 %, sticky by key
    assert site.canaries() == {"production": (2, 10.0)}
    arms = _sticky(site)
    site.restart()
    assert _sticky(site) == arms  # the same key, the same arm, in a new process
    state = site.judged(range(2600, 3300))
    assert state["phase"] == "probation", state.get("last_decision")
    promotion = _move(site, alias="production", action="set", to_version=2)
    _check_promotion(promotion, 1)
    assert site.canaries() == {} and site.aliases()["production"] == 2
    site.until(lambda s: s["phase"] == "idle")  # kept: its probation (5 s) ended
    # 3. a challenger that learnt wrong labels canaries and is never promoted
    site.age_inputs()
    _policy(site, min_new_labels=150)
    site.stream(slice(3300, 3450), per_request=150, flipped=True)
    site.restart()
    state = site.until(lambda s: s["phase"] == "shadowing")
    assert state["challenger_version"] == 3 and site.canaries() == {"production": (3, 10.0)}
    state = site.judged(range(2600, 3300))
    assert state["last_decision"]["verdict"] == "rejected", state["last_decision"]
    assert state["last_decision"]["evidence"]["source"] == "canary"
    assert site.aliases()["production"] == 2 and site.canaries() == {}
    assert not any(m["alias"] == "production" and m["to_version"] == 3 and m["action"] != "canary"
                   for m in site.history())
    assert "rejected" in site.history()[0]["reason"]
    # undone by hand: the canary's end rolled back, recorded as the person's move
    site.call("POST", f"/registered-models/{NAME}/aliases/production/rollback")
    assert site.canaries() == {"production": (3, 10.0)} and site.history()[0]["actor"] is None


def _sticky(site: Site) -> dict[str, str]:
    """Each of 20 keys asked three times: one arm per key (and both arms among them)."""
    arms = {}
    for key in [f"key-{i}" for i in range(20)]:
        seen = {site.call("POST", "/predict", {"model": NAME, "instances": [site.X[0].tolist()]},
                          headers={"X-Msvmav-Route-Key": key}).headers["X-Msvmav-Model-Arm"]
                for _ in range(3)}
        assert len(seen) == 1, key
        arms[key] = seen.pop()
    assert set(arms.values()) == {"primary", "canary"}
    return arms


def _check_promotion(move: dict, from_version: int) -> None:
    evidence = move["evidence"]
    assert (move["actor"], move["from_version"]) == ("policy", from_version)
    assert "promoted" in move["reason"] and evidence["source"] == "canary"
    assert evidence["canary"]["challenger"]["labelled"] >= MIN_ROWS
    assert evidence["canary"]["served"]["labelled"] >= MIN_ROWS
    assert evidence["gain"] >= 0.05
    for side in ("challenger", "served"):
        assert 0 <= evidence[f"{side}_estimated_accuracy"] <= 1
        assert 0 <= evidence[f"{side}_cost"] <= 1  # the error rate: production has no costs
    assert evidence["served_cost"] == pytest.approx(1 - evidence["served_accuracy"])
