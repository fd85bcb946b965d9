"""The registered model's page shows an alias's canary split and sets and ends it (issue 48):
the form sends PATCH …/aliases/{alias} with the canary, the aliases table shows the split, the
history the canary's start and end, and *End canary* ends it. Debian's Chromium against a real
``msvmav serve``; the page logs no console error and makes no failed request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ui.browser_support import (
    ADMIN_KEY,
    api,
    browser,
    two_blobs_csv,
    ui_server,
    upload_on_page,
    wait_job,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_registry_page_sets_shows_and_ends_a_canary(tmp_path: Path):
    data = two_blobs_csv(tmp_path / "rows.csv", n=120, shift=3.0, seed=4)
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        dataset_id = upload_on_page(b, data)
        for alpha in (0.1, 0.01):
            job = api(server, "POST", "/train", {"dataset_id": dataset_id, "kernel": "linear",
                                                 "alpha": alpha, "max_iter": 40,
                                                 "register_as": "credit"})
            wait_job(server, job["id"])
        api(server, "PUT", "/registered-models/credit/aliases/production", {"version": 1})
        sent: list[dict] = []
        b.page.on("request", lambda r: sent.append(json.loads(r.post_data))
                  if r.method == "PATCH" else None)
        b.goto("/ui/registry/credit")
        form = b.page.get_by_role("form", name="Canary traffic")
        form.get_by_label("Canary version").select_option("2")
        form.get_by_label("Percent of requests").fill("25")
        b.page.once("dialog", lambda d: d.accept())
        form.get_by_role("button", name="Set canary").click()
        notice = b.page.locator("#alias-out .success")
        notice.wait_for()
        assert "version 2 answers 25 % of its requests, version 1 the rest" in notice.inner_text()
        assert sent == [{"canary": {"version": 2, "percent": 25}}]
        detail = api(server, "GET", "/registered-models/credit")
        v2 = next(v["model_id"] for v in detail["versions"] if v["version"] == 2)
        assert detail["canaries"] == {
            "production": {"version": 2, "percent": 25.0, "model_id": v2}}
        row = b.page.locator("#aliases").get_by_role("row", name="production")
        assert row.locator("td.canary").inner_text() == "version 2 at 25 % (version 1: 75 %)"
        assert "canary: version 2 at 25 % started" in b.page.locator("#history").inner_text()
        b.page.once("dialog", lambda d: d.accept())
        b.page.get_by_role("button", name="End canary of production").click()
        b.page.get_by_text("canary ended; version 1 answers every request").wait_for()
        assert api(server, "GET", "/registered-models/credit")["canaries"] == {}
        assert b.page.locator("#aliases td.canary").inner_text() == "—"
        assert "canary ended (was version 2 at 25 %)" in b.page.locator("#history").inner_text()
        assert b.axe() == []
        b.assert_clean()
