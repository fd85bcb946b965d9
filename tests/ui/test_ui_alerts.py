"""The monitoring page's alert rules and webhook deliveries in Debian's Chromium (issue 47): an
admin creates a rule with the page's form and sees it listed; a registry event delivered by
the server to a real receiver in this test is listed with its HTTP code; a read key sees both
lists and no form; no console error, no request outside the service, no serious axe finding."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.app.alert_support import receiver, wait_for
from tests.live_server import LiveServer
from tests.ui.browser_support import (
    ADMIN_KEY,
    Browser,
    another_session,
    api,
    browser,
    small_csv,
    ui_server,
    wait_job,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, int, Browser]]:
    tmp_path = tmp_path_factory.mktemp("ui-alerts")
    with ui_server(tmp_path, "sqlite") as server:
        data = small_csv(tmp_path / "blobs.csv")
        r = httpx.post(server.url + "/datasets", files={"file": ("blobs.csv", data.read_bytes())},
                       data={"label": "class"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        assert r.status_code == 201, r.text
        job = wait_job(server, api(server, "POST", "/train", {"dataset_id": r.json()["id"]})["id"])
        with browser(server) as b:
            b.sign_in(ADMIN_KEY)
            yield server, job["model_id"], b


def test_create_a_rule_and_see_the_deliveries(site):
    server, model_id, b = site
    b.goto("/ui/monitoring")
    b.page.locator("#alert-rules").get_by_text("No alert rule yet").wait_for()
    form = b.page.locator("#alert-rule-form")
    form.get_by_label("Model or reference").fill(str(model_id))
    form.get_by_label("Metric").select_option("clipped_share")
    form.get_by_label("Comparison").select_option("gt")
    form.get_by_label("Level").fill("0.05")
    form.get_by_label("Window (s)").fill("60")
    form.get_by_role("button", name="Create rule").click()
    form.get_by_text("Rule #1 created.").wait_for()
    row = b.page.locator("#alert-rules tbody tr")
    row.first.wait_for()  # the list is drawn again after the answer: wait for it, then count
    assert row.count() == 1
    assert "clipped_share > 0.05" in row.inner_text() and f"model #{model_id}" in row.inner_text()
    (rule,) = api(server, "GET", "/alert-rules")
    assert (rule["model_id"], rule["metric"], rule["comparison"], rule["level"],
            rule["window_seconds"]) == (model_id, "clipped_share", "gt", 0.05, 60)

    with receiver() as hook_server:
        api(server, "POST", "/webhooks", {"url": hook_server.url, "events": ["version_registered"]})
        api(server, "POST", "/registered-models", {"name": "blobs"})
        api(server, "POST", "/registered-models/blobs/versions", {"model_id": model_id})
        hook_server.wait(1)
        wait_for(lambda: api(server, "GET", "/webhook-deliveries")[0]["status"] == "delivered",
                 what="the delivery recorded")
    b.goto("/ui/monitoring")
    sent = b.page.locator("#webhook-deliveries tbody tr")
    sent.first.wait_for()
    assert sent.count() == 1
    text = sent.inner_text()
    assert "version_registered" in text and "delivered" in text and "1 (200)" in text
    assert b.axe() == []
    b.assert_clean()


def test_a_read_key_sees_the_lists_and_no_form(site):
    server, _, b = site
    read_key = api(server, "POST", "/keys", {"name": "viewer", "scope": "read"})["key"]
    with another_session(b) as viewer:
        viewer.sign_in(read_key)
        viewer.goto("/ui/monitoring")
        viewer.page.locator("#alert-rules tbody tr, #alert-rules .empty").first.wait_for()
        viewer.page.locator("#webhook-deliveries").first.wait_for()
        assert viewer.page.locator("#alert-rule-form").count() == 0
        assert viewer.page.get_by_role("button", name="Create rule").count() == 0
        viewer.assert_clean()
