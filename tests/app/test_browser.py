"""Swagger UI in a real headless Chromium against a real ``msvmav serve``, with every request
that leaves 127.0.0.1 aborted: the page renders from the service's own assets, and the
walkthrough (upload, train, poll, predict) works by clicking, with the prefilled examples.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the ``playwright`` Python package
(no ``playwright install``: the system browser is used). Skipped when either is missing. Set
``MSVMAV_SCREENSHOT=1`` to refresh docs/img/swagger.png from this run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_server import CHROMIUM, LAUNCH_ARGS, ROOT, LiveServer, live_server
from tests.wait_support import wait_until

SCREENSHOT = ROOT / "docs" / "img" / "swagger.png"
TIMEOUT_MS = 30_000

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is absent")
if not Path(CHROMIUM).exists():
    pytest.skip("chromium is absent (apt-get install chromium)", allow_module_level=True)


# The service as a team deploys it: keys required (MSVMAV_ADMIN_KEY), so the walk starts with
# Swagger UI's Authorize button.
ADMIN_KEY = "msv_browser-admin-key-0123456789abcdef"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(tmp_path, MSVMAV_ADMIN_KEY=ADMIN_KEY) as server:
        yield server


@pytest.fixture
def browser_page(server: LiveServer):
    """A page whose requests outside the server are aborted and recorded."""
    outside: list[tuple[str, str]] = []

    def only_local(route) -> None:
        if route.request.url.startswith(server.url + "/"):
            route.continue_()
        else:
            outside.append((route.request.resource_type, route.request.url))
            route.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            context.set_default_timeout(TIMEOUT_MS)
            context.route("**/*", only_local)
            yield context.new_page(), outside
        finally:
            browser.close()


# -- the walk's steps, one helper per gesture ------------------------------------------------------
def authorize(page, api_key: str) -> None:
    """Swagger UI's Authorize dialog: enter ``api_key`` for every secured operation."""
    page.locator("button.authorize").first.click()
    dialog = page.locator(".dialog-ux .modal-ux")
    dialog.locator("input").first.fill(api_key)
    dialog.locator("button.authorize").first.click()
    dialog.locator("button.btn-done").click()


def open_operation(page, tag: str, operation_id: str):
    """Expand an operation and press "Try it out"; its block."""
    block = page.locator(f"#operations-{tag}-{operation_id}")
    block.locator(".opblock-summary-control").click()
    block.locator("button.try-out__btn").click()
    return block


def execute(page, block, status: int) -> dict | list | str:
    """Press Execute and read the live response: its status must be ``status``."""
    clear = block.locator("button.btn-clear")
    if clear.count():  # a previous answer is shown: clear it so the new one is read
        clear.click()
        block.locator(".live-responses-table").wait_for(state="detached")
    block.locator("button.execute").click()
    code = block.locator(".live-responses-table .response .response-col_status").first
    code.wait_for()
    body = block.locator(".live-responses-table .response-col_description pre").first
    text = body.inner_text()
    assert code.inner_text().strip() == str(status), text
    try:
        return json.loads(text)
    except ValueError:
        return text


def wait_job_succeeded(page, block, job_id: int) -> dict:
    """GET /jobs/{id} by clicking Execute until the job has finished; it must succeed."""
    block.locator('input[placeholder="job_id"]').fill(str(job_id))

    def ended() -> dict | None:
        job = execute(page, block, 200)
        return job if job["status"] in ("succeeded", "failed", "cancelled") else None

    job = wait_until(ended, timeout=60, interval=0.3, message=f"job {job_id} did not end")
    assert job["status"] == "succeeded", job
    return job


def test_swagger_ui_walkthrough_by_clicking(server: LiveServer, browser_page, tmp_path: Path):
    page, outside = browser_page
    page.goto(server.url + "/docs")
    page.locator("#operations-datasets-create_dataset").wait_for()
    assert page.title() == "msvmav - Swagger UI"

    # 0. Without a key the service answers 401; Authorize with the admin key.
    upload = open_operation(page, "datasets", "create_dataset")
    upload.locator('input[type="file"]').set_input_files(str(ROOT / "examples" / "wdbc.arff"))
    refused = execute(page, upload, 401)
    assert refused["title"] == "Unauthorized", refused
    authorize(page, ADMIN_KEY)

    # 1. Upload examples/wdbc.arff with the form as prefilled.
    dataset = execute(page, upload, 201)
    assert (dataset["id"], dataset["name"], dataset["n_rows"]) == (1, "wdbc.arff", 569)

    # 2. Train with the first prefilled example (linear MSVMAv on dataset 1).
    train = open_operation(page, "jobs", "create_train_job")
    job = execute(page, train, 202)
    assert (job["id"], job["dataset_id"], job["status"]) == (1, 1, "queued")

    # 3. Poll GET /jobs/1 until it has succeeded.
    poll = open_operation(page, "jobs", "get_job")
    job = wait_job_succeeded(page, poll, job["id"])
    assert job["model_id"] == 1

    # 4. Predict with the prefilled rows (two wdbc rows with their true labels).
    predict = open_operation(page, "predict", "predict")
    answer = execute(page, predict, 200)
    assert [p["label"] for p in answer["predictions"]] == [2, 1]
    assert answer["accuracy"] == 1

    predict.locator(".live-responses-table").scroll_into_view_if_needed()
    shot = tmp_path / "swagger.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("MSVMAV_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)

    assert outside == [], outside  # Swagger UI asked for nothing outside the service

    # ReDoc renders from the service's own script too, and asks nothing of any other host
    # (its bundle's CDN logo is blanked: app.apidocs).
    page.goto(server.url + "/redoc")
    page.locator("h2", has_text="Upload a dataset").first.wait_for()
    assert "msvmav" in page.locator("h1").first.inner_text()
    page.wait_for_load_state("networkidle")
    assert outside == [], outside
