"""The model page's cost-rule form (issue 44): it sends POST /models/{id}/threshold with the two
costs, the rule is stored with the model, and /predict's labels then follow it. Debian's
Chromium against a real ``msvmav serve``; the page logs no console error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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


def test_the_model_page_sets_a_cost_rule(tmp_path: Path):
    data = two_blobs_csv(tmp_path / "rows.csv", n=160, shift=1.2, seed=2)
    with ui_server(tmp_path, "sqlite") as server, browser(server) as b:
        b.sign_in(ADMIN_KEY)
        dataset_id = upload_on_page(b, data)
        job = api(server, "POST", "/train", {"dataset_id": dataset_id, "kernel": "linear",
                                             "max_iter": 40})
        model_id = wait_job(server, job["id"])["result"]["model_id"]
        sent: list[dict] = []
        b.page.on("request", lambda r: sent.append(json.loads(r.post_data))
                  if r.method == "POST" and r.url.endswith("/threshold") else None)
        b.goto(f"/ui/models/{model_id}")
        form = b.page.get_by_role("form", name="Set a cost rule")
        form.get_by_label("Cost of a false negative").fill("8")
        form.get_by_role("button", name="Set rule").click()
        status = form.get_by_role("status")
        status.wait_for()
        assert "threshold P(pos) >=" in status.inner_text()
        assert sent == [{"objective": {"cost_fp": 1, "cost_fn": 8}}]
        rows = np.loadtxt(data, delimiter=",", skiprows=1, usecols=(0, 1)).tolist()
        answer = api(server, "POST", "/predict", {"model_id": model_id, "instances": rows})
        t = answer["decision_rule"]["rule"]["threshold"]
        p1 = [p["probabilities"]["pos"] for p in answer["predictions"]]
        assert [p["label"] for p in answer["predictions"]] == [
            "pos" if p >= t else "neg" for p in p1]
        b.assert_clean()
