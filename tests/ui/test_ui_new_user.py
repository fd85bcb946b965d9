"""The path a new user takes in the web interface, by clicking in Debian's Chromium against a
real ``msvmav serve`` (SQLite; PostgreSQL too when TEST_DATABASE_URL is set), at 1366 px and
at 390 px (a phone): upload a file, train from the form with a hold-out and a search, watch
the progress bar finish, open the model, register it three times, point ``production`` at
versions 1, 2 and 3, roll back twice (3 -> 2 -> 1), predict a row from the form, see the row
in monitoring, page through 1,001 datasets. No console error of any kind (a CSP violation, an
invalid ``pattern``, a 401 or another failed load all log one), no request outside the service
and no answer of 400 or above on the way; axe-core finds no serious or critical violation on
the pages passed. The form's 422 is its own test (a failed request logs a console error)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.ui.browser_support import (
    ADMIN_KEY,
    BACKENDS,
    Browser,
    api,
    browser,
    image_width,
    many_datasets,
    small_csv,
    ui_server,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

WIDTHS = [1366, 390]
BULK = 1000  # datasets added through the service layer before paging


def axe_and_width(b: Browser) -> None:
    """axe-core finds nothing serious, and the page does not scroll sideways (at 390 px an RBF
    model's nested fit path did by 4 px)."""
    assert b.axe() == [], b.page.url
    wide = b.page.evaluate("document.documentElement.scrollWidth")
    assert wide <= b.page.viewport_size["width"], (b.page.url, wide)


def upload_and_train(b: Browser, data: Path) -> None:
    page = b.page
    page.get_by_role("link", name="Datasets", exact=True).click()
    form = page.get_by_role("form", name="Upload a dataset")
    form.get_by_label("File").set_input_files(str(data))
    form.get_by_label("Label column").fill("class")
    form.get_by_role("button", name="Upload").click()
    stored = form.get_by_role("status")
    stored.wait_for()
    assert "80 rows, 3 features" in stored.inner_text()
    page.get_by_role("cell", name="blobs.csv").wait_for()
    axe_and_width(b)

    stored.get_by_role("link").click()  # its page: profile and preview, then train
    page.get_by_role("cell", name="numeric").first.wait_for()
    assert page.locator("section[aria-label=Columns] table tbody tr").count() == 3
    train = page.get_by_role("form", name="Train a model")
    train.get_by_label("Hold-out fraction").fill("0.25")
    train.get_by_label("Search", exact=True).select_option("quick")
    train.get_by_label("Folds").fill("3")
    axe_and_width(b)
    train.get_by_role("button", name="Train").click()


def watch_job_and_register(b: Browser, server) -> None:
    page = b.page
    page.wait_for_url("**/ui/jobs/1")
    page.locator("#job-status .status-succeeded").wait_for(timeout=240_000)
    assert page.locator("#job-progress").evaluate("p => p.value") == 1
    job = api(server, "GET", "/jobs/1")
    assert job["params"]["test_fraction"] == 0.25 and job["params"]["search"]["cv"] == 3
    axe_and_width(b)
    page.locator("#job-model").click()

    page.wait_for_url("**/ui/models/1")  # margins figure loaded through the key, CV table
    name = "Cumulative distribution of model 1's training margins"
    figure = page.get_by_role("img", name=name)
    figure.wait_for()
    assert image_width(figure) > 100
    assert page.locator("#cv-table tbody tr").count() == 9  # quick: alpha x beta, 3 each
    page.locator("#curves svg").first.wait_for()
    axe_and_width(b)
    reg = page.get_by_role("form", name="Register this model")
    reg.get_by_label("Registered model name").fill("blobs")
    for version in (1, 2, 3):  # three versions (of one model) to move the alias over
        reg.get_by_role("button", name="Register").click()
        reg.get_by_role("link", name=f"blobs version {version}").wait_for()
    reg.get_by_role("link", name="blobs version 3").click()


def move_and_roll_back_twice(b: Browser, server) -> None:
    page = b.page
    page.wait_for_url("**/ui/registry/blobs")
    for version in (1, 2, 3):
        move = page.get_by_role("form", name="Point an alias")
        move.get_by_label("Version").select_option(str(version))
        page.once("dialog", lambda d: d.accept())
        move.get_by_role("button", name="Move alias").click()
        page.locator("#alias-out .success").filter(has_text=f"{version}.").wait_for()
    axe_and_width(b)
    notices = []
    for _ in range(2):
        back = page.get_by_role("button", name="Roll back production")
        back.scroll_into_view_if_needed()
        box = back.bounding_box()
        width = page.viewport_size["width"]
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, box  # on screen
        page.once("dialog", lambda d: d.accept())
        back.click()
        notice = page.locator("#alias-out .success").filter(has_text="rolled back")
        notice.wait_for()
        notices.append(notice.inner_text())
    assert notices == ["production rolled back from version 3 to version 2.",
                       "production rolled back from version 2 to version 1."]
    assert api(server, "GET", "/registered-models/blobs")["aliases"] == {"production": 1}
    history = page.locator("#history").inner_text()
    assert "rolled back from version 2 to 1" in history


def predict_and_monitor(b: Browser, server) -> None:
    page = b.page
    page.locator("#aliases").get_by_role("link", name="#1").click()
    page.locator("#versions").get_by_role("link", name="blobs version 1").wait_for()
    predict = page.get_by_role("form", name="Predict rows")
    predict.get_by_label("Rows").fill("4.1, 3.9, 4.2")
    predict.get_by_role("button", name="Predict").click()
    row = page.locator("#predictions tbody tr")
    row.wait_for()
    assert row.count() == 1 and "pos" in row.inner_text()
    axe_and_width(b)

    page.goto(server.url + "/ui/monitoring/blobs@production")
    live = page.locator("#live-vs-reference").get_by_role("row", name="Live (window)")
    live.wait_for()
    assert live.locator("td").first.inner_text() == "1"
    b.page.wait_for_load_state("networkidle")
    axe_and_width(b)
    report = api(server, "GET", "/registered-models/blobs/monitoring?alias=production")
    assert report["live"]["n"] == 1 and report["model_id"] == 1


def page_through_datasets(b: Browser, server, data: Path) -> None:
    many_datasets(server, BULK, data)
    b.goto("/ui/datasets")
    page = b.page
    status = page.locator(".pager p")
    nxt = page.get_by_role("button", name="Next page")
    pages = math.ceil((BULK + 1) / 20)
    for n in range(2, pages + 1):
        nxt.click()
        status.filter(has_text=f"Page {n} ·").wait_for()
    assert nxt.is_disabled()
    assert f"{(BULK + 1) - 20 * (pages - 1)} shown" in status.inner_text()
    assert page.get_by_role("cell", name="blobs.csv").count() == 1  # the oldest, last
    page.get_by_role("button", name="Previous page").click()
    status.filter(has_text=f"Page {pages - 1} ·").wait_for()
    assert page.locator("#app tbody tr").count() == 20
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= page.viewport_size["width"], wide
    axe_and_width(b)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_new_user_path_by_clicking(tmp_path: Path, backend: str, width: int):
    data = small_csv(tmp_path / "blobs.csv")
    with ui_server(tmp_path, backend) as server, browser(server, width) as b:
        page = b.page
        page.goto(server.url + "/")  # / redirects to /ui, which asks for a key first
        assert page.url == server.url + "/ui"
        b.sign_in(ADMIN_KEY)
        page.get_by_text("Nothing here yet").wait_for()
        upload_and_train(b, data)
        watch_job_and_register(b, server)
        move_and_roll_back_twice(b, server)
        predict_and_monitor(b, server)
        page_through_datasets(b, server, data)
        b.assert_clean()


def test_upload_form_shows_the_apis_422(tmp_path: Path):
    data = small_csv(tmp_path / "blobs.csv")
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        b.goto("/ui/datasets")
        form = b.page.get_by_role("form", name="Upload a dataset")
        form.get_by_label("File").set_input_files(str(data))
        form.get_by_label("Label column").fill("label")
        form.get_by_role("button", name="Upload").click()
        problem = form.get_by_role("alert")
        problem.wait_for()
        assert "422" in problem.inner_text() and "label" in problem.inner_text()
        b.screenshot("upload-422")
        form.get_by_label("Label column").fill("class")
        form.get_by_role("button", name="Upload").click()
        form.get_by_role("status").wait_for()
        assert problem.count() == 0
        # the one 422 is the only failed request, and Chromium's line for it the only error
        assert [s for s, _ in b.failed] == [422], b.failed
        assert len(b.console_errors) == 1 and "422" in b.console_errors[0], b.console_errors
        assert b.outside == []
