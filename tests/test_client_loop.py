"""The client's retrain, policy and canary methods against a live ``msvmav serve`` (keys
required, its embedded worker, not mocked): predictions through a registered model fed back, a
retrain job that adds them (its lineage in the registry), a policy set, read and deleted; a
canary started, changed and ended, and a route key that keeps its arm."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from msvmav_client import Client, Forbidden, ValidationFailed
from tests.app.alert_support import wait_for
from tests.app.support import blobs, to_csv
from tests.live_server import LiveServer, live_server

ADMIN_KEY = "msv_client-loop-admin-key-0123456789abcd"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("loop"), MSVMAV_ADMIN_KEY=ADMIN_KEY) as server:
        yield server


def test_retrain_and_policy_through_the_client(server):
    with Client(server.url, api_key=ADMIN_KEY, timeout=60) as client:
        X, y = blobs(n=120, seed=2, shift=2.0)
        dataset = client.upload(to_csv(np.asarray(X), y), name="blobs.csv")
        job = client.train(dataset["id"], kernel="linear", calibration="none", max_iter=50,
                           register_as="credit")
        assert job.wait(timeout=120, poll=0.1)["status"] == "succeeded"
        client.set_alias("credit", "production", 1)
        X2, y2 = blobs(n=30, seed=3, shift=2.0)
        ids = [f"c-{i}" for i in range(30)]
        client.predict("credit", X2.tolist(), ids=ids)
        # the log and the inputs are written off the request path: feedback matches once both are
        wait_for(lambda: client.feedback("credit", ids, y2.tolist())["matched"] == 30)
        retrain = client.retrain("credit", alias="production")
        done = retrain.wait(timeout=120, poll=0.1)
        assert done["status"] == "succeeded", done
        version = client.registered_model("credit")["versions"][0]
        assert version["version"] == 2 and version["lineage"]["feedback_rows"] == 30
        assert version["lineage"]["warm_start"]["applied"] == "linear"
        policy = client.set_policy("credit", trigger={"min_new_labels": 100}, action="promote")
        assert policy["state"]["phase"] == "idle" and policy["config"]["action"] == "promote"
        assert client.policy("credit")["config"]["trigger"]["min_new_labels"] == 100
        with pytest.raises(ValidationFailed) as caught:
            client.set_policy("credit", action="deploy")
        assert "action" in str(caught.value)
        client.delete_policy("credit")
        read = client.create_key("reader", "read")["key"]
        with Client(server.url, api_key=read, timeout=60) as reader, pytest.raises(Forbidden):
            reader.retrain("credit")


def test_canary_calls_through_the_client(server):
    with Client(server.url, api_key=ADMIN_KEY, timeout=60) as client:
        X, y = blobs(n=80, seed=4, shift=3.0)
        dataset = client.upload(to_csv(np.asarray(X), y), name="canary.csv")
        for _ in range(2):
            job = client.train(dataset["id"], kernel="linear", calibration="none", max_iter=50,
                               register_as="canaried")
            assert job.wait(timeout=120, poll=0.1)["status"] == "succeeded"
        alias = client.set_alias("canaried", "production", 1, canary=(2, 30))
        assert alias["canary"]["version"] == 2 and alias["canary"]["percent"] == 30
        arms = {}
        for key in [f"user-{i}" for i in range(12)]:
            seen = {(a["arm"], a["version"]) for a in (
                client.predict("canaried", X[:1].tolist(), route_key=key) for _ in range(3))}
            assert len(seen) == 1, key  # sticky: one key, one arm
            arms[key] = seen.pop()
        assert {arm for arm, _ in arms.values()} == {"primary", "canary"}
        assert all(version == (2 if arm == "canary" else 1) for arm, version in arms.values())
        changed = client.set_canary("canaried", "production", 2, 60)
        assert changed["canary"]["percent"] == 60 and changed["version"] == 1
        for key, (arm, _) in arms.items():  # raising the share only moves keys to the canary
            if arm == "canary":
                assert client.predict("canaried", X[:1].tolist(), route_key=key)["arm"] == arm
        assert client.set_canary("canaried", "production", None)["canary"] is None
        moves = client.history("canaried")["items"]
        assert [m["action"] for m in moves[:3]] == ["canary", "canary", "set"]
        policy = client.set_policy("canaried", trigger={"min_new_labels": 50},
                                   judge={"min_rows": 20, "canary_percent": 10},
                                   action="promote")
        assert policy["config"]["judge"]["canary_percent"] == 10
        with pytest.raises(ValidationFailed) as caught:
            client.set_policy("canaried", judge={"canary_percent": 100})
        assert "canary_percent" in str(caught.value)
