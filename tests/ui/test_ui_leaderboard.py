"""The dataset page's leaderboard in Debian's Chromium against a real ``msvmav serve``: the
dataset's models on their shared hold-out, the best marked, the numbers those of the API's
leaderboard (tests/app/test_leaderboard.py checks them against sklearn.metrics), a cost rule
entered in the form and sent as the API documents it; a read key sees it; at 390 px the page
does not scroll sideways; no console error, no request outside the service, no 4xx."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.ui.browser_support import ADMIN_KEY, api, browser, small_csv, ui_server, wait_job

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _seed(server, tmp_path: Path) -> tuple[int, list[int]]:
    data = small_csv(tmp_path / "blobs.csv")
    r = httpx.post(server.url + "/datasets", files={"file": ("blobs.csv", data.read_bytes())},
                   data={"label": "class"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    models = []
    for algorithm in ("msvmav", "svm"):
        job = api(server, "POST", "/train", {"dataset_id": ds, "algorithm": algorithm,
                                             "test_fraction": 0.3, "seed": 1})
        models.append(wait_job(server, job["id"])["model_id"])
    return ds, models


def _rows(b) -> list[list[str]]:
    table = b.page.get_by_role("table", name="Leaderboard")
    table.wait_for()
    return [[c.strip() for c in r.locator("th, td").all_inner_texts()]
            for r in table.locator("tbody tr").all()]


def test_the_dataset_page_ranks_its_models_and_takes_a_cost_rule(tmp_path: Path):
    with ui_server(tmp_path, "sqlite") as server:
        ds, models = _seed(server, tmp_path)
        read_key = api(server, "POST", "/keys", {"name": "viewer", "scope": "read"})["key"]
        board = api(server, "GET", f"/datasets/{ds}/leaderboard", key=read_key)
        with browser(server) as b:
            b.sign_in(read_key)
            b.goto(f"/ui/datasets/{ds}")
            rows = _rows(b)
            assert [r[1] for r in rows] == [f"#{e['model_id']}" for e in board["models"]]
            assert sorted(int(r[1][1:]) for r in rows) == sorted(models)
            assert [r[4] for r in rows] == ["argmax"] * 2  # the rule that made the labels
            best = [r for r in rows if r[0].endswith("(best)")]
            assert [r[1] for r in best] == [f"#{i}" for i in board["best"]]
            assert b.page.locator("tr.best").count() == len(board["best"])
            assert b.page.get_by_role("columnheader", name="expected cost").count() == 0

            sent: list[str] = []
            b.page.on("request", lambda r: sent.append(r.url) if "/leaderboard" in r.url else None)
            form = b.page.get_by_role("form", name="Compare the models")
            form.get_by_label("Best by").select_option("expected_cost")
            form.get_by_label("Cost of a false positive").fill("5")
            form.get_by_label("Cost of a false negative").fill("1")
            form.get_by_role("button", name="Compare").click()
            b.page.get_by_role("columnheader", name="expected cost").wait_for()
            assert sent and sent[-1].endswith(
                f"/datasets/{ds}/leaderboard?metric=expected_cost&cost_fp=5&cost_fn=1"), sent
            costly = api(server, "GET", f"/datasets/{ds}/leaderboard?metric=expected_cost"
                         "&cost_fp=5&cost_fn=1", key=read_key)
            rows = _rows(b)
            assert [r[1] for r in rows] == [f"#{e['model_id']}" for e in costly["models"]]
            shown = [float(r[-2]) for r in rows]
            assert shown == pytest.approx([e["expected_cost"] for e in costly["models"]],
                                          abs=1e-4)
            # beside it, its 95 % interval (the API's bootstrap interval)
            intervals = [[float(v) for v in r[-1].split(" – ")] for r in rows]
            assert intervals == [pytest.approx(e["expected_cost_interval"], abs=1e-4)
                                 for e in costly["models"]]

            b.page.set_viewport_size({"width": 390, "height": 844})
            b.goto(f"/ui/datasets/{ds}")
            _rows(b)
            assert b.page.evaluate("document.documentElement.scrollWidth") <= 390
            b.assert_clean()
