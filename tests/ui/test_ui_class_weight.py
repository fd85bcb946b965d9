"""The training form's class weights (issue 44): "balanced" is sent as POST /train's
``class_weight`` string, a JSON object as the mapping, and the model keeps it in its params.
Debian's Chromium against a real ``msvmav serve``; the requests the page sends are recorded as
sent, and the page logs no console error."""

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


def test_class_weights_are_sent_and_kept_in_the_model(tmp_path: Path):
    data = two_blobs_csv(tmp_path / "blobs.csv")
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        upload_on_page(b, data)
        dataset_page = b.page.url
        sent: list[dict] = []
        b.page.on("request", lambda r: sent.append(json.loads(r.post_data))
                  if r.method == "POST" and r.url.endswith("/train") else None)
        for given, expected in (("balanced", "balanced"), ('{"pos": 3}', {"pos": 3})):
            b.page.goto(dataset_page)
            train = b.page.get_by_role("form", name="Train a model")
            train.get_by_label("Search", exact=True).select_option("")
            train.get_by_label("Class weights").fill(given)
            train.get_by_role("button", name="Train").click()
            b.page.wait_for_url("**/ui/jobs/*")
            assert sent[-1]["class_weight"] == expected, sent
            job = wait_job(server, int(b.page.url.rsplit("/", 1)[1]))
            model = api(server, "GET", f"/models/{job['result']['model_id']}")
            assert model["params"]["class_weight"] == expected, model["params"]
        b.assert_clean()


def test_the_weight_column_is_chosen_among_the_numeric_columns(tmp_path: Path):
    """The form's "Weight column" lists the dataset's numeric columns; the one chosen is sent
    as POST /train's ``weight_column`` and is no feature of the model trained."""
    blobs = two_blobs_csv(tmp_path / "blobs.csv").read_text().splitlines()
    rows = [f"{line},{'kind' if i == 0 else 'ab'[i % 2]},{'w' if i == 0 else 1 + i % 3}"
            for i, line in enumerate(blobs)]
    data = tmp_path / "weighted.csv"
    data.write_text("\n".join(rows) + "\n")
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        upload_on_page(b, data)
        sent: list[dict] = []
        b.page.on("request", lambda r: sent.append(json.loads(r.post_data))
                  if r.method == "POST" and r.url.endswith("/train") else None)
        train = b.page.get_by_role("form", name="Train a model")
        choice = train.get_by_label("Weight column")
        choice.wait_for()
        offered = choice.locator("option").evaluate_all("os => os.map((o) => o.value)")
        assert offered == ["", "a", "b", "w"], offered  # numeric only: not "kind"
        train.get_by_label("Search", exact=True).select_option("")
        choice.select_option("w")
        train.get_by_role("button", name="Train").click()
        b.page.wait_for_url("**/ui/jobs/*")
        assert sent[-1]["weight_column"] == "w", sent
        job = wait_job(server, int(b.page.url.rsplit("/", 1)[1]))
        model = api(server, "GET", f"/models/{job['result']['model_id']}")
        assert model["params"]["weight_column"] == "w"
        assert "w" not in model["feature_names"] and model["sample_weight"]["column"] == "w"
        b.assert_clean()
