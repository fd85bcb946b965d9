"""The training form's hold-out fraction as the API documents it (POST /train's
``test_fraction``): a fraction is sent as given, 0 as null ("no hold-out"), and an empty
field not at all (the API's default: 0.2 from 100 rows on). Debian's Chromium against a real
``msvmav serve``; the requests the page sends are recorded as sent."""

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


def test_hold_out_fraction_zero_is_sent_as_null_and_trains_on_every_row(tmp_path: Path):
    data = two_blobs_csv(tmp_path / "blobs.csv")
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        upload_on_page(b, data)
        sent: list[dict] = []
        b.page.on("request", lambda r: sent.append(json.loads(r.post_data))
                  if r.method == "POST" and r.url.endswith("/train") else None)
        train = b.page.get_by_role("form", name="Train a model")
        train.get_by_label("Hold-out fraction").fill("0")
        train.get_by_role("button", name="Train").click()
        b.page.wait_for_url("**/ui/jobs/*")
        assert len(sent) == 1 and "test_fraction" in sent[0], sent
        assert sent[0]["test_fraction"] is None
        job = wait_job(server, int(b.page.url.rsplit("/", 1)[1]))
        model = api(server, "GET", f"/models/{job['result']['model_id']}")
        assert model["n_test"] == 0 and model["n_train"] == 120, model
        b.assert_clean()
