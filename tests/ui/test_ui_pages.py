"""Every page of the web interface in Debian's Chromium, on a service holding a dataset, a job,
a model registered with ``production``, a logged prediction and an experiment:

- each page renders (its content, no error block) with every request outside the service
  aborted, and asks nothing of any other host; no Content-Security-Policy violation;
- axe-core (tests/ui/axe, shipped, not fetched) finds no serious or critical violation;
- a read key's pages hold no write control (an admin's hold them: the check is not vacuous),
  and the keys page is the admin's only;
- the pages are reached from the navigation bar with the keyboard alone.

``MSVMAV_SCREENSHOT=1`` refreshes docs/img/ui-*.png from the admin's walk."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer
from tests.ui.browser_support import (
    ADMIN_KEY,
    Browser,
    another_session,
    api,
    browser,
    image_width,
    small_csv,
    ui_server,
    wait_job,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Buttons, links and file inputs that change something (the API's write or admin operations).
WRITE_CONTROL = re.compile(
    r"^(upload|train|register|move alias|roll back.*|cancel job|create key|create rule|revoke.*|"
    r"delete.*)$",
    re.IGNORECASE,
)



def seed(server, tmp_path: Path) -> dict[str, str]:
    """A dataset, a trained model registered as blobs@production with one prediction logged,
    an experiment, and a read key; the pages to visit."""
    data = small_csv(tmp_path / "blobs.csv")
    r = httpx.post(server.url + "/datasets", files={"file": ("blobs.csv", data.read_bytes())},
                   data={"label": "class"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    train = api(server, "POST", "/train", {"dataset_id": ds, "test_fraction": 0.25})
    job = wait_job(server, train["id"])
    model = job["model_id"]
    api(server, "POST", "/registered-models", {"name": "blobs"})
    api(server, "POST", "/registered-models/blobs/versions", {"model_id": model})
    api(server, "PUT", "/registered-models/blobs/aliases/production", {"version": 1})
    api(server, "POST", "/predict", {"model": "blobs@production", "instances": [[4.0, 4.0, 4.0]]})
    exp = api(server, "POST", "/experiments", {"dataset_ids": [ds], "algorithms": ["msvmav", "svm"],
                                               "splits": 2, "cv": 2})
    wait_job(server, exp["id"])
    read_key = api(server, "POST", "/keys", {"name": "viewer", "scope": "read"})["key"]
    pages = {
        "overview": "/ui",
        "datasets": "/ui/datasets",
        "dataset": f"/ui/datasets/{ds}",
        "jobs": "/ui/jobs",
        "job": f"/ui/jobs/{job['id']}",
        "models": "/ui/models",
        "model": f"/ui/models/{model}",
        "registry": "/ui/registry",
        "registered-model": "/ui/registry/blobs",
        "monitoring": "/ui/monitoring",
        "monitoring-alias": "/ui/monitoring/blobs@production",
        "experiments": "/ui/experiments",
        "experiment": f"/ui/experiments/{exp['id']}",
        "keys": "/ui/keys",
    }
    return {"read_key": read_key, **{"page:" + k: v for k, v in pages.items()}}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict, Browser]]:
    """One seeded service and one admin's browser session for the module's tests (a server, a
    seeding and a Chromium each cost seconds). None changes what another sees: they read pages,
    or draw into the page they are on; each test starts by opening its page."""
    tmp_path = tmp_path_factory.mktemp("ui-pages")
    with ui_server(tmp_path, "sqlite") as server:
        seeded = seed(server, tmp_path)
        with browser(server) as b:
            b.sign_in(ADMIN_KEY)
            yield server, seeded, b


def rendered(b: Browser, path: str) -> None:
    """Open ``path`` and wait until its script has drawn it and every image has loaded."""
    b.goto(path)
    b.page.locator("#app > :not(p.muted:first-child)").first.wait_for()
    b.page.wait_for_load_state("networkidle")
    for img in b.page.locator("figure img").all():
        assert image_width(img) > 100, path
    errors = b.page.locator("#app .problem")
    assert errors.count() == 0, (path, errors.all_inner_texts())


def controls(b: Browser) -> list[str]:
    """The accessible names of the page's buttons and links, and "file input" per file input."""
    names = [n.strip() for n in b.page.get_by_role("button").all_inner_texts()]
    names += [n.strip() for n in b.page.get_by_role("link").all_inner_texts()]
    names += ["file input"] * b.page.locator("input[type=file]").count()
    return names


def test_every_page_renders_offline_accessibly_and_read_keys_see_no_write_control(site):
    _server, seeded, b = site
    pages = {k.removeprefix("page:"): v for k, v in seeded.items() if k.startswith("page:")}
    admin_writes: set[str] = set()
    for name, path in pages.items():  # the admin's walk, in the module's admin session
        rendered(b, path)
        violations = b.axe()
        assert violations == [], (path, violations)
        b.screenshot(name)
        admin_writes |= {c for c in controls(b) if WRITE_CONTROL.match(c)}
        if name == "dataset":  # the upload form is on the list page
            assert b.page.get_by_role("button", name="Train").count() == 1
    b.assert_clean()  # no console error of any kind (CSP, pattern, 401 …), no 4xx
    # the check below is not vacuous: an admin's pages hold each kind of write control
    assert {"Upload", "Train", "Register", "Move alias", "Roll back production",
            "Create key", "Revoke viewer"} <= admin_writes, admin_writes

    with another_session(b) as reader:
        reader.sign_in(seeded["read_key"])
        assert reader.page.get_by_role("link", name="Keys").count() == 0  # admin only
        for name, path in pages.items():
            rendered(reader, path)
            found = [c for c in controls(reader) if WRITE_CONTROL.match(c) or c == "file input"]
            assert found == [], (path, found)
            assert reader.axe() == [], path
            # what a read key may do is there: predict (POST /predict reads) and export
            if name == "model":
                assert reader.page.get_by_role("button", name="Predict").count() == 1
                assert reader.page.get_by_role("button", name="Export ONNX").count() == 1
            elif name == "keys":
                assert "scope admin" in reader.page.locator("#app").inner_text()
        reader.assert_clean()


def test_keyboard_reaches_every_page_from_the_navigation(site):
    _server, _seeded, b = site
    page = b.page
    titles = []
    for name in ("Datasets", "Jobs", "Models", "Registry", "Monitoring", "Experiments", "Keys"):
        b.goto("/ui")
        page.keyboard.press("Tab")  # the skip link first
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        for _ in range(12):  # then the brand and the navigation's links, in order
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent") == name:
                break
        page.keyboard.press("Enter")
        page.wait_for_url(f"**/ui/{name.lower()}")
        titles.append(page.locator("h1").inner_text())
    assert titles == ["Datasets", "Jobs", "Models", "Registry", "Monitoring", "Experiments",
                      "Keys"]


def test_line_chart_draws_the_curves_it_is_given(site):
    """The model page's ROC/PR/reliability charts (drawn when the model detail carries the
    hold-out evaluation's curves): points land where the axes say, in the page's own script."""
    _server, _seeded, b = site
    b.goto("/ui")
    got = b.page.evaluate("""() => {
        const fig = UI.lineChart("ROC", [{label: "a", x: [0, 0.5, 1], y: [0, 0.8, 1]},
                                         {label: "b", x: [0, null, 1], y: [0, 0.3, 1]}],
                                 "fpr", "tpr", true);
        document.body.append(fig);
        const lines = [...fig.querySelectorAll("polyline")].map(p => p.getAttribute("points"));
        return {lines, label: fig.querySelector("svg").getAttribute("aria-label"),
                legend: [...fig.querySelectorAll(".legend li")].map(li => li.textContent)};
    }""")
    # x: 42 + x * 248; y: 204 - y * 194 (viewBox 300 x 240, margins 42/10/10/36)
    assert got["lines"] == ["42.0,204.0 166.0,48.8 290.0,10.0", "42.0,204.0 290.0,10.0"]
    assert got["label"] == "ROC" and got["legend"] == ["a", "b"]
    assert b.axe() == []
