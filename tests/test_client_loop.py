"""The client's retrain and policy methods against a live ``msvmav serve`` (keys required, its
embedded worker, not mocked): predictions through a registered model fed back, a retrain job
that adds them (its lineage in the registry), a policy set, read and deleted."""

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
