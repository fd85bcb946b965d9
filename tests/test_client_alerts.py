"""The client's alert and webhook methods against a live ``msvmav serve`` (keys required, not
mocked): a rule created, read, changed, listed and deleted; a webhook created (its secret
shown once), listed, read and deleted; a registry event delivered by the server's dispatcher to
a real receiver in this process, signed, and listed with its response code."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

from msvmav_client import Client, ValidationFailed
from tests.app.alert_support import receiver, signature_ok, wait_for
from tests.app.support import blobs, to_csv
from tests.live_server import LiveServer, live_server

ADMIN_KEY = "msv_client-alerts-admin-key-0123456789ab"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("alerts"), MSVMAV_ADMIN_KEY=ADMIN_KEY,
                     MSVMAV_ALERT_INTERVAL_SECONDS="0.2") as server:
        yield server


def test_alert_rules_and_webhooks_through_the_client(server):
    with Client(server.url, api_key=ADMIN_KEY, timeout=60) as client, receiver() as hook_server:
        X, y = blobs(n=60, seed=2)
        dataset = client.upload(to_csv(np.asarray(X), y), name="blobs.csv")
        job = client.train(dataset["id"], max_iter=30)
        assert job.wait(timeout=120, poll=0.1)["status"] == "succeeded"

        rule = client.create_alert_rule(job.model_id, "clipped_share", "gt", 0.05,
                                        window_seconds=60, cooldown_seconds=600)
        assert (rule["metric"], rule["level"], rule["model_id"]) == ("clipped_share", 0.05,
                                                                     job.model_id)
        assert client.alert_rule(rule["id"])["window_seconds"] == 60
        assert client.update_alert_rule(rule["id"], level=0.1)["level"] == 0.1
        assert [r["id"] for r in client.alert_rules()] == [rule["id"]]
        with pytest.raises(ValidationFailed) as caught:
            client.create_alert_rule(job.model_id, "nonsense", "gt", 0.1)
        assert "metric" in str(caught.value)
        client.delete_alert_rule(rule["id"])
        assert client.alert_rules() == []

        hook = client.create_webhook(hook_server.url, ["version_registered"])
        assert hook["secret"].startswith("whsec_")
        assert "secret" not in client.webhook(hook["id"])
        assert [h["id"] for h in client.webhooks()] == [hook["id"]]
        client.register("blobs", job.model_id)
        (got,) = hook_server.wait(1)
        assert signature_ok(hook["secret"], got)
        assert json.loads(got.body)["data"]["registered_model"] == "blobs"
        (delivery,) = wait_for(lambda: [d for d in client.webhook_deliveries(hook["id"])
                                        if d["status"] == "delivered"], what="the delivery")
        assert delivery["response_code"] == 200 and delivery["event"] == "version_registered"
        client.delete_webhook(hook["id"])
        assert client.webhooks() == []
