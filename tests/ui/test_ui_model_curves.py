"""The model page's ROC, precision-recall and reliability curves are the hold-out's (issue 45):
the page asks POST /models/{id}/evaluate for the model's hold-out rows (its detail's
``holdout.rows``), draws what that answer gives and says so; a model without a hold-out gets
all the dataset's rows, said so too. Debian's Chromium against a real ``msvmav serve``; the
evaluate request and its answer are recorded as the page sent and received them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ui.browser_support import ADMIN_KEY, api, browser, small_csv, ui_server, wait_job

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _train(server, dataset_id: int, test_fraction: float | None) -> dict:
    job = api(server, "POST", "/train", {"dataset_id": dataset_id, "test_fraction": test_fraction,
                                         "calibration": "sigmoid"})
    return api(server, "GET", f"/models/{wait_job(server, job['id'])['result']['model_id']}")


def _curves(b, model: dict) -> tuple[str, dict, str]:
    """(the evaluate request's form, its answer, the curves section's text) on the page."""
    with b.page.expect_response(lambda r: r.url.endswith(f"/models/{model['id']}/evaluate")) as r:
        b.goto(f"/ui/models/{model['id']}")
    answer = r.value
    b.page.locator("#curves svg").first.wait_for()
    section = b.page.get_by_role("region", name="ROC, precision-recall and reliability curves")
    return answer.request.post_data or "", json.loads(answer.body()), section.inner_text()


def test_the_model_pages_curves_are_the_hold_outs(tmp_path: Path):
    data = small_csv(tmp_path / "blobs.csv")
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        ds = server_upload(server, data)
        held = _train(server, ds, 0.25)
        rows = held["holdout"]["rows"]
        assert len(rows) == held["n_test"] == 20
        form, answer, text = _curves(b, held)
        assert 'name="rows"\r\n\r\nholdout' in form, form
        assert (answer["rows"], answer["n"], answer["row_indices"]) == ("holdout", 20, rows)
        assert "20 hold-out rows" in text and "did not train on" in text, text
        whole = _train(server, ds, None)
        form, answer, text = _curves(b, whole)
        assert 'name="rows"\r\n\r\nall' in form, form
        assert (answer["rows"], answer["n"]) == ("all", 80)
        assert "all 80 rows" in text and "training part included" in text, text
        b.assert_clean()


def server_upload(server, data: Path) -> int:
    """The CSV stored through the API (label column ``class``)."""
    import httpx

    r = httpx.post(server.url + "/datasets", headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                   files={"file": (data.name, data.read_bytes())}, data={"label": "class"},
                   timeout=60)
    assert r.status_code == 201, r.text
    return r.json()["id"]
