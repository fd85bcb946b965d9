"""The loop with real processes (issue 48, process tier): ``msvmav serve`` (its embedded worker,
its alert evaluator every 0.2 s stepping the policy) on SQLite and PostgreSQL, stopped and
started again between the policy's phases: live rows of a moved concept fed back trigger a
retrain, the retrained version shadows production and is promoted once it wins on the
fed-back rows both scored, the move in the alias history with actor ``policy``, its reason and
evidence. (The rejection and the rollback run in-process: tests/app/test_loop_policy.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.app.loop_support import LiveSite, running_site
from tests.app.support import to_csv, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.process]
BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get("TEST_DATABASE_URL") else [])
NAME = "credit"
ENV = {"MSVMAV_ALERT_INTERVAL_SECONDS": "0.2", "MSVMAV_SERVE_RECHECK_SECONDS": "0"}


def rows(axis: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, "neg", "pos")
    X = rng.normal(size=(n, 3))
    X[y == "pos", axis] += 3.0
    return X, y


class Site(LiveSite):
    """A server on one database, restartable (a new process on the same database)."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        super().__init__(tmp_path, url, ENV)

    def call(self, method: str, path: str, body=None, **kw):
        r = self.response(method, path, body, **kw)
        return r.json() if r.content else None

    def stream(self, axis: int, n: int, seed: int, flipped: bool = False) -> None:
        X, y = rows(axis, n, seed)
        ids = [f"live-{self.count + i}" for i in range(n)]
        self.count += n
        self.call("POST", "/predict", {"model": NAME, "instances": X.tolist(), "ids": ids})
        labels = np.where(y == "pos", "neg", "pos") if flipped else y
        # the log is written off the request path: every id is matched once it is
        wait_for(lambda: self.call("POST", "/feedback", {"model": NAME, "ids": ids,
                                                         "labels": labels.tolist()})[
            "matched"] == n, timeout=60)

    def state(self) -> dict:
        return self.call("GET", f"/registered-models/{NAME}/policy")["state"]

    def until(self, predicate, timeout: float = 180.0) -> dict:
        return wait_for(lambda: (s := self.state()) and predicate(s) and s, timeout=timeout,
                        interval=0.2)


@pytest.fixture(params=BACKENDS)
def site(request, tmp_path):
    yield from running_site(Site, request.param, tmp_path)


def test_the_loop_across_restarts(site):
    X, y = rows(0, 300, seed=0)
    ds = httpx.post(site.server.url + "/datasets", files={"file": ("a.csv", to_csv(X, y))},
                    timeout=60).json()
    job = site.call("POST", "/train", {"dataset_id": ds["id"], "kernel": "linear",
                                       "calibration": "none", "register_as": NAME})
    wait_for(lambda: site.call("GET", f"/jobs/{job['id']}")["status"] == "succeeded",
             timeout=180, interval=0.2)
    site.call("PUT", f"/registered-models/{NAME}/aliases/production", {"version": 1})
    site.call("PUT", f"/registered-models/{NAME}/policy", {
        "trigger": {"min_new_labels": 150, "cooldown_seconds": 0},
        "judge": {"min_rows": 80, "margin": 0.05}, "action": "promote"})
    site.stream(1, 150, seed=1)  # the concept moved
    site.until(lambda s: s["phase"] in ("retraining", "shadowing"))
    site.restart()  # the API and its worker: the job and the policy go on
    state = site.until(lambda s: s["phase"] == "shadowing")
    assert state["challenger_version"] == 2
    site.stream(1, 100, seed=2)
    site.restart()
    state = site.until(lambda s: s["phase"] == "probation")
    aliases = site.call("GET", f"/registered-models/{NAME}")["aliases"]
    assert aliases["production"] == 2 and aliases["previous"] == 1
    history = site.call("GET", f"/registered-models/{NAME}/history?limit=100")["items"]
    promotion = next(m for m in history if m["alias"] == "production")
    assert promotion["actor"] == "policy" and promotion["to_version"] == 2
    assert promotion["evidence"]["labelled"] >= 80 and "promoted" in promotion["reason"]
