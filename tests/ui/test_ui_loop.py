"""The registry page's retraining policy and lineage in Debian's Chromium (issue 48): a
registered model with a policy shows its cycle and judge, a retrained version its lineage; a
model without a policy says how to set one; no console error, no serious axe finding."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.live_server import LiveServer
from tests.ui.browser_support import (
    ADMIN_KEY,
    Browser,
    api,
    browser,
    small_csv,
    ui_server,
    wait_job,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Browser]]:
    tmp_path = tmp_path_factory.mktemp("ui-loop")
    with ui_server(tmp_path, "sqlite") as server:
        data = small_csv(tmp_path / "blobs.csv")
        r = httpx.post(server.url + "/datasets", files={"file": ("blobs.csv", data.read_bytes())},
                       data={"label": "class"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        assert r.status_code == 201, r.text
        job = api(server, "POST", "/train", {"dataset_id": r.json()["id"], "kernel": "linear",
                                              "calibration": "none", "register_as": "blobs"})
        wait_job(server, job["id"])
        api(server, "PUT", "/registered-models/blobs/aliases/production", {"version": 1})
        wait_job(server, api(server, "POST", "/registered-models/blobs/retrain", {})["id"])
        with browser(server) as b:
            b.sign_in(ADMIN_KEY)
            yield server, b


def test_the_policy_and_the_lineage_on_the_registry_page(site):
    server, b = site
    b.goto("/ui/registry/blobs")
    section = b.page.get_by_role("region", name="Retraining policy")
    section.get_by_text("No policy").wait_for()
    versions = b.page.get_by_role("region", name="Versions").inner_text()
    assert "retrained from version 1 (+0 fed-back rows)" in versions
    api(server, "PUT", "/registered-models/blobs/policy",
        {"trigger": {"min_new_labels": 50}, "judge": {"min_rows": 30}, "action": "promote"})
    b.goto("/ui/registry/blobs")
    text = b.page.get_by_role("region", name="Retraining policy").inner_text()
    assert "idle" in text and "promote" in text and "30 fed-back rows, margin 0.01" in text
    assert b.axe() == []
    b.assert_clean()
