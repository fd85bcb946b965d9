"""The path a new user takes in the web interface, by clicking in Debian's Chromium against a
real ``msvmav serve`` (SQLite; PostgreSQL too when TEST_DATABASE_URL is set): upload a file,
fix the 422 the form shows, train, watch the progress bar finish, open the model, register it,
point ``production`` at it, predict a row from the form, see the row in monitoring. Every
request outside the service is aborted (and must not happen), and the pages break no rule of
their Content-Security-Policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.browser_support import (
    ADMIN_KEY,
    BACKENDS,
    api,
    browser,
    image_width,
    small_csv,
    ui_server,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_user_path_by_clicking(tmp_path: Path, backend: str):
    data = small_csv(tmp_path / "blobs.csv")
    with ui_server(tmp_path, backend) as server, browser(server) as b:
        page = b.page
        # / redirects to /ui, which asks for a key first
        page.goto(server.url + "/")
        assert page.url == server.url + "/ui"
        b.sign_in(ADMIN_KEY)
        page.get_by_text("Nothing here yet").wait_for()

        # 1. upload with a wrong label column: the API's 422 shows in the form
        page.get_by_role("link", name="Datasets", exact=True).click()
        form = page.get_by_role("form", name="Upload a dataset")
        form.get_by_label("File").set_input_files(str(data))
        form.get_by_label("Label column").fill("label")
        form.get_by_role("button", name="Upload").click()
        problem = form.get_by_role("alert")
        problem.wait_for()
        assert "422" in problem.inner_text() and "label" in problem.inner_text()
        b.screenshot("upload-422")

        # 2. fix it: the dataset is stored and listed
        form.get_by_label("Label column").fill("class")
        form.get_by_role("button", name="Upload").click()
        stored = form.get_by_role("status")
        stored.wait_for()
        assert "80 rows, 3 features" in stored.inner_text()
        assert problem.count() == 0
        page.get_by_role("cell", name="blobs.csv").wait_for()

        # 3. its page: profile and preview, then train
        stored.get_by_role("link").click()
        page.get_by_role("cell", name="numeric").first.wait_for()
        profile = page.locator("section[aria-label=Columns] table")
        assert profile.locator("tbody tr").count() == 3
        train = page.get_by_role("form", name="Train a model")
        train.get_by_role("button", name="Train").click()

        # 4. the job's page: the progress bar fills, then the model is a link
        page.wait_for_url("**/ui/jobs/1")
        page.locator("#job-status .status-succeeded").wait_for(timeout=120_000)
        assert page.locator("#job-progress").evaluate("p => p.value") == 1
        page.locator("#job-model").click()

        # 5. the model's page: margins figure loaded through the key, hold-out shown
        page.wait_for_url("**/ui/models/1")
        name = "Cumulative distribution of model 1's training margins"
        figure = page.get_by_role("img", name=name)
        figure.wait_for()
        assert image_width(figure) > 100
        # 6. register it
        reg = page.get_by_role("form", name="Register this model")
        reg.get_by_label("Registered model name").fill("blobs")
        reg.get_by_role("button", name="Register").click()
        reg.get_by_role("link", name="blobs version 1").click()

        # 7. point production at version 1 (confirmed)
        page.wait_for_url("**/ui/registry/blobs")
        page.once("dialog", lambda d: d.accept())
        move = page.get_by_role("form", name="Point an alias")
        move.get_by_role("button", name="Move alias").click()
        page.locator("#aliases").get_by_role("rowheader", name="production").wait_for()
        history = page.locator("#history")
        assert "created at version 1" in history.inner_text()
        assert api(server, "GET", "/registered-models/blobs")["aliases"] == {"production": 1}

        # 8. predict one row from the model's form
        page.locator("#aliases").get_by_role("link", name="#1").click()
        page.locator("#versions").get_by_role("link", name="blobs version 1").wait_for()
        predict = page.get_by_role("form", name="Predict rows")
        predict.get_by_label("Rows").fill("4.1, 3.9, 4.2")
        predict.get_by_role("button", name="Predict").click()
        row = page.locator("#predictions tbody tr")
        row.wait_for()
        assert row.count() == 1 and "pos" in row.inner_text()

        # 9. the row in monitoring, through the alias
        page.goto(server.url + "/ui/monitoring/blobs@production")
        live = page.locator("#live-vs-reference").get_by_role("row", name="Live (window)")
        live.wait_for()
        assert live.locator("td").first.inner_text() == "1"
        report = api(server, "GET", "/registered-models/blobs/monitoring?alias=production")
        assert report["live"]["n"] == 1 and report["model_id"] == 1

        assert b.outside == [], b.outside
        assert [e for e in b.console_errors if "Content Security Policy" in e] == []
