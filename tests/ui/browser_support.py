"""Shared pieces of the web interface's browser tests: a live ``msvmav serve`` (SQLite, and
PostgreSQL when TEST_DATABASE_URL is set), Debian's Chromium with every request outside the
service aborted and recorded, Content-Security-Policy reports collected, and axe-core (shipped
in tests/ui/axe, never fetched) run in the page."""

from __future__ import annotations

import io
import json
import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.app.support import migrated_database
from tests.live_server import CHROMIUM, LAUNCH_ARGS, ROOT, LiveServer, live_server
from tests.wait_support import wait_until

TIMEOUT_MS = 30_000
AXE = Path(__file__).parent / "axe" / "axe.min.js"
IMG = ROOT / "docs" / "img"
ADMIN_KEY = "msv_ui-admin-key-0123456789abcdefghijkl"
BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get("TEST_DATABASE_URL") else [])

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is absent")
if not Path(CHROMIUM).exists():
    pytest.skip("chromium is absent (apt-get install chromium)", allow_module_level=True)


@contextmanager
def ui_server(tmp_path: Path, backend: str) -> Iterator[LiveServer]:
    """``msvmav serve`` with keys required, on a fresh database of ``backend``."""
    (tmp_path / "db").mkdir()
    with migrated_database(backend, tmp_path / "db") as url:
        env = {"MSVMAV_ADMIN_KEY": ADMIN_KEY, "MSVMAV_DATABASE_URL": url}
        with live_server(tmp_path, **env) as server:
            yield server


@dataclass
class Browser:
    page: Any
    context: Any
    server: LiveServer
    outside: list[tuple[str, str]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    #: every answer of 400 or above the page received (a 401 for /favicon.ico, say)
    failed: list[tuple[int, str]] = field(default_factory=list)

    def assert_clean(self) -> None:
        """No console message of type error (a CSP violation, an invalid ``pattern``, a failed
        load all log one), no request outside the service, no answer of 400 or above."""
        assert self.console_errors == [], self.console_errors
        assert self.outside == [], self.outside
        assert self.failed == [], self.failed

    def goto(self, path: str) -> None:
        self.page.goto(self.server.url + path)
        self.page.wait_for_load_state("networkidle")

    def sign_in(self, key: str) -> None:
        """The key form every page shows until a key is entered (once per browser session)."""
        self.goto("/ui")
        self.page.get_by_label("API key").fill(key)
        self.page.get_by_role("button", name="Use this key").click()
        self.page.get_by_text("scope").first.wait_for()

    def axe(self) -> list[dict[str, Any]]:
        """axe-core's violations of impact serious or critical on the current page. The
        script is evaluated through the DevTools protocol (the page's CSP allows no inline
        script, rightly)."""
        if not self.page.evaluate("typeof window.axe !== 'undefined'"):
            self.page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
        result = self.page.evaluate("axe.run(document).then(r => r.violations)")
        return [
            {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in result
            if v["impact"] in ("serious", "critical")
        ]

    def screenshot(self, name: str) -> None:
        """docs/img/ui-{name}.png when MSVMAV_SCREENSHOT is set."""
        if os.environ.get("MSVMAV_SCREENSHOT"):
            IMG.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(IMG / f"ui-{name}.png"), full_page=False)


@contextmanager
def browser(server: LiveServer, width: int = 1280) -> Iterator[Browser]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            yield session(chromium, server, width)
        finally:
            chromium.close()


@contextmanager
def another_session(b: Browser) -> Iterator[Browser]:
    """A second, separate browser session (its own context: no key entered, its own records of
    outside requests and console errors) in ``b``'s Chromium; closed at the block's end."""
    other = session(b.context.browser, b.server)
    try:
        yield other
    finally:
        other.context.close()


def session(chromium: Any, server: LiveServer, width: int = 1280) -> Browser:
    """A new context and page in ``chromium`` (``width`` px wide): requests outside ``server``
    aborted and recorded, console errors and answers of 400 or above recorded."""
    context = chromium.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    b = Browser(context.new_page(), context, server)

    def only_local(route) -> None:
        if route.request.url.startswith(server.url + "/"):
            route.continue_()
        else:
            b.outside.append((route.request.resource_type, route.request.url))
            route.abort()

    context.route("**/*", only_local)
    b.page.on(
        "console",
        lambda m: b.console_errors.append(m.text) if m.type == "error" else None,
    )
    b.page.on("pageerror", lambda e: b.console_errors.append(str(e)))
    b.page.on("response", lambda r: b.failed.append((r.status, r.url)) if r.status >= 400 else None)
    return b


def image_width(img: Any, timeout: float = 20.0) -> int:
    """The natural width of an <img> once it has loaded (0: broken)."""
    def loaded() -> tuple[int] | None:  # (a tuple: a broken image's width 0 is an answer)
        width = img.evaluate("i => (i.complete && i.src ? i.naturalWidth : -1)")
        return (width,) if width >= 0 else None

    return wait_until(loaded, timeout=timeout, interval=0.1, message="the image did not load")[0]


def small_csv(path: Path) -> Path:
    """Two separable blobs, 3 features, labels "neg"/"pos" in a column named ``class``."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (40, 3)), rng.normal(4, 1, (40, 3))])
    y = ["neg"] * 40 + ["pos"] * 40
    rows = [",".join(f"{v:.4f}" for v in r) + f",{lab}" for r, lab in zip(X, y, strict=True)]
    lines = ["a,b,c,class", *rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def two_blobs_csv(path: Path, n: int = 120, shift: float = 4.0, seed: int = 1) -> Path:
    """``n`` rows of two 2-feature blobs ``shift`` apart (4: separable; ~1: overlapping, so
    probabilities fall in between), labels "neg"/"pos" in a column named ``class``."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0, 1, (n // 2, 2)), rng.normal(shift, 1, (n // 2, 2))])
    labels = ["neg"] * (n // 2) + ["pos"] * (n // 2)
    rows = [f"{a:.4f},{b:.4f},{lab}" for (a, b), lab in zip(X, labels, strict=True)]
    path.write_text("\n".join(["a,b,class", *rows]) + "\n")
    return path


def upload_on_page(b: Browser, data: Path, label: str = "class") -> int:
    """Upload ``data`` with the datasets page's form, as a person does, and open the new
    dataset's page; returns its id."""
    b.goto("/ui/datasets")
    upload = b.page.get_by_role("form", name="Upload a dataset")
    upload.get_by_label("File").set_input_files(str(data))
    upload.get_by_label("Label column").fill(label)
    upload.get_by_role("button", name="Upload").click()
    upload.get_by_role("status").get_by_role("link").click()
    return int(b.page.url.rsplit("/", 1)[1])


def api(server: LiveServer, method: str, path: str, body: Any = None, key: str = ADMIN_KEY) -> Any:
    """The JSON API, to set up what a test needs without the browser."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as r:
        text = r.read()
    return json.loads(text) if text else None


def wait_job(server: LiveServer, job_id: int, timeout: float = 300.0) -> dict:
    """The job once it has ended, polled through the API; it must have succeeded."""

    def ended() -> dict | None:
        job = api(server, "GET", f"/jobs/{job_id}")
        return job if job["status"] in ("succeeded", "failed", "cancelled") else None

    job = wait_until(ended, timeout=timeout, interval=0.2, message=f"job {job_id} did not finish")
    assert job["status"] == "succeeded", job
    return job


def many_datasets(server: LiveServer, n: int, csv: Path, label: str = "class") -> None:
    """``n`` more datasets of ``csv``, stored through the service layer (app.datasets.service)
    on the server's database, committed a hundred at a time: a thousand uploads over HTTP
    would take minutes."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.core.config import Settings
    from app.datasets import service

    url = server.env["MSVMAV_DATABASE_URL"]
    settings = Settings(database_url=url)
    engine = create_engine(url)
    data = csv.read_bytes()
    try:
        with Session(engine) as s:
            for i in range(n):
                service.create(s, file=io.BytesIO(data), filename=f"bulk-{i:04d}.csv",
                               options=service.UploadOptions(label=label), settings=settings)
                if i % 100 == 99:
                    s.commit()
            s.commit()
    finally:
        engine.dispose()
