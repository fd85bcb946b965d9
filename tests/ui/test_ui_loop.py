"""The registry page's retraining policy and lineage in Debian's Chromium (issue 48): a
registered model with a policy shows its cycle and judge, a retrained version its lineage; a
model without a policy says how to set one; the policy form, submitted in Chromium, sets a
policy that retrains on fed-back rows and canaries the challenger, whose record is then shown
beside production's with the canary split and the policy's moves (reason, evidence); no
console error, no serious axe finding, nothing wider than 390 px on a phone."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from tests.app.support import wait_for
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


def _traffic(server: LiveServer, start: int, n: int, per_request: int) -> None:
    """n rows of the blobs through blobs@production (ids live-<i>), fed back through it."""
    rng = np.random.default_rng(start)
    y = np.where(np.arange(n) % 2 == 0, "neg", "pos")
    X = rng.normal(size=(n, 3)) + np.where(y == "pos", 4.0, 0.0)[:, None]
    ids = [f"live-{start + i}" for i in range(n)]
    for i in range(0, n, per_request):
        api(server, "POST", "/predict", {"model": "blobs@production", "ids": ids[i:i + per_request],
                                         "instances": X[i:i + per_request].tolist()})
    wait_for(lambda: api(server, "POST", "/feedback", {
        "model": "blobs@production", "ids": ids, "labels": y.tolist()})["matched"] == n,
        timeout=60, interval=0.2)


def test_the_policy_form_the_record_and_the_canary(site):
    server, b = site
    api(server, "DELETE", "/registered-models/blobs/policy")
    b.goto("/ui/registry/blobs")
    form = b.page.get_by_role("form", name="Set the policy")
    form.get_by_label("Retrain after N new fed-back rows").fill("10")
    form.get_by_label("Judge on at least N fed-back rows").fill("100000")  # never decides
    form.get_by_label("Canary percent (empty: shadow only)").fill("50")
    form.get_by_role("button", name="Save policy").click()
    b.page.get_by_text("Policy saved: promote, judged on 100000 fed-back rows, canary at 50 %"
                       ).wait_for()
    policy = api(server, "GET", "/registered-models/blobs/policy")
    assert policy["config"]["trigger"]["min_new_labels"] == 10
    assert policy["config"]["judge"]["canary_percent"] == 50
    _traffic(server, 0, 20, 20)
    wait_for(lambda: api(server, "GET", "/registered-models/blobs/policy")["state"]["phase"]
             == "shadowing", timeout=180, interval=0.5)
    _traffic(server, 100, 40, 2)
    b.goto("/ui/registry/blobs")
    table = b.page.locator("#policy-record-table")
    table.wait_for()
    text = table.inner_text()
    assert "canary arm" in text and "Challenger (version 3)" in text
    assert "Production (version 1)" in text
    assert "Estimated accuracy" in text and "Cost per row" in text
    aliases = b.page.locator("#aliases").inner_text()
    assert "version 3 at 50 %" in aliases
    history = b.page.locator("#history").inner_text()
    assert "canary: version 3 at 50 % started" in history
    assert "answers 50 % of 'production'" in history
    assert "policy" in history
    assert b.axe() == []
    b.page.set_viewport_size({"width": 390, "height": 844})
    try:
        b.goto("/ui/registry/blobs")
        b.page.locator("#policy-record-table").wait_for()
        assert b.page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        b.page.set_viewport_size({"width": 1280, "height": 900})
    b.assert_clean()
