"""The dashboard in the Chromium the tests run (issue 45), on a service holding a dataset, an
rbf model chosen by a grid search with a hold-out, a linear model whose ``params`` override a
top-level default, and registered models whose ``production`` moved 1 -> 2 -> 3:

- no page logs a console error or receives a 4xx, before signing in too (the session probe,
  the tab's icon);
- every HTML ``pattern`` compiles under the ``v`` flag the browser compiles it with, and
  validates;
- the training form sends the hold-out, the search, the calibration and the seed;
- the job page shows the hyper-parameters the model used, the model page the cross-validation
  table, the ROC/PR/reliability curves and only its kernel's parameters;
- at 390 px no page scrolls sideways and *Roll back* is on screen; two rollbacks walk back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.error import HTTPError

import httpx
import pytest

from tests.live_server import LiveServer
from tests.ui.browser_support import (
    ADMIN_KEY,
    Browser,
    another_session,
    api,
    browser,
    small_csv,
    ui_server,
    wait_job,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")



def seed(server: LiveServer, tmp_path: Path) -> dict:
    data = small_csv(tmp_path / "blobs.csv")
    r = httpx.post(server.url + "/datasets", files={"file": ("blobs.csv", data.read_bytes())},
                   data={"label": "class"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                   timeout=60)
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    searched = api(server, "POST", "/train", {"dataset_id": ds, "kernel": "rbf",
                                              "test_fraction": 0.25,
                                              "search": {"grid": "quick", "cv": 3}})
    linear = api(server, "POST", "/train", {"dataset_id": ds, "test_fraction": 0.25,
                                            "params": {"beta": 2.0}})
    searched, linear = wait_job(server, searched["id"]), wait_job(server, linear["id"])
    for name in ("blobs", "walk"):
        api(server, "POST", "/registered-models", {"name": name})
        for _ in range(3):
            api(server, "POST", f"/registered-models/{name}/versions",
                {"model_id": searched["model_id"]})
        for v in (1, 2, 3):
            api(server, "PUT", f"/registered-models/{name}/aliases/production", {"version": v})
    return {"dataset": ds, "searched": searched, "linear": linear}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict, Browser]]:
    tmp_path = tmp_path_factory.mktemp("ui-dashboard")
    with ui_server(tmp_path, "sqlite") as server:
        seeded = seed(server, tmp_path)
        with browser(server) as b:
            b.sign_in(ADMIN_KEY)
            yield server, seeded, b


def pages(seeded: dict) -> dict[str, str]:
    return {
        "overview": "/ui",
        "datasets": "/ui/datasets",
        "dataset": f"/ui/datasets/{seeded['dataset']}",
        "job": f"/ui/jobs/{seeded['searched']['id']}",
        "model": f"/ui/models/{seeded['searched']['model_id']}",
        "linear model": f"/ui/models/{seeded['linear']['model_id']}",
        "registry": "/ui/registry",
        "registered model": "/ui/registry/blobs",
    }


def drawn(b: Browser, path: str, ready: str = "#app > :not(p.muted:first-child)") -> None:
    b.goto(path)
    b.page.locator(ready).first.wait_for()
    b.page.wait_for_load_state("networkidle")


def test_no_console_error_or_failed_request_before_or_after_signing_in(site):
    server, seeded, b = site
    with another_session(b) as fresh:  # no key entered yet: the key form, and nothing logged
        fresh.goto("/ui/models")
        fresh.page.get_by_label("API key").wait_for()
        fresh.page.wait_for_load_state("networkidle")
        icon = fresh.page.locator("link[rel=icon]").get_attribute("href")
        fresh.assert_clean()
        # a wrong key: refused in the form, still no 401 in the console
        fresh.page.get_by_label("API key").fill("msv_wrong-key-0123456789abcdefghijklmn")
        fresh.page.get_by_role("button", name="Use this key").click()
        fresh.page.get_by_role("alert").wait_for()
        assert "refused" in fresh.page.get_by_role("alert").inner_text()
        fresh.assert_clean()
        fresh.sign_in(ADMIN_KEY)
        for path in pages(seeded).values():
            drawn(fresh, path)
        fresh.assert_clean()
    r = httpx.get(server.url + icon)  # the icon is served without a key
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")


#: value -> whether the field must say patternMismatch: the registry's name rule (every name
#: field), and the fields with a pattern of their own (the policy form's alert rule ids)
NAME_VERDICTS = {"bad name": True, "42": True, "-x": True, "wdbc-2.v_1": False}
PATTERN_VERDICTS = {"alert_rule_ids": {"1, 2": False, "3": False, "x": True, "1;2": True}}


def test_every_pattern_compiles_under_the_v_flag_and_validates(site):
    _server, seeded, b = site
    checked = []
    for path in (pages(seeded)["model"], pages(seeded)["registered model"],
                 pages(seeded)["dataset"]):
        drawn(b, path, "form")
        inputs = b.page.locator("input[pattern]")
        assert inputs.count() >= 1, path
        for i in range(inputs.count()):
            field = inputs.nth(i)
            pattern = field.get_attribute("pattern")
            compiled = b.page.evaluate(
                "p => { try { new RegExp(p, 'v'); return 'ok'; } catch (e) { return e.message; } }",
                pattern)
            assert compiled == "ok", (path, pattern, compiled)
            name = field.get_attribute("name")
            expected = PATTERN_VERDICTS.get(name, NAME_VERDICTS)  # the registry's name rule
            verdicts = {}
            for value in expected:
                field.fill(value)
                verdicts[value] = field.evaluate("f => f.validity.patternMismatch")
            assert verdicts == expected, (path, name)
            field.fill("")
            checked.append(name)
    assert {"registered_model", "alias", "register_as", "alert_rule_ids"} <= set(checked), checked
    assert b.console_errors == [], b.console_errors


def test_training_form_sends_hold_out_search_calibration_and_seed(site):
    server, seeded, b = site
    drawn(b, pages(seeded)["dataset"], "form")
    form = b.page.get_by_role("form", name="Train a model")
    form.get_by_label("Hold-out fraction").fill("0.25")
    form.get_by_label("Calibration").select_option("isotonic")
    form.get_by_label("Seed").fill("7")
    form.get_by_label("Search", exact=True).select_option("quick")
    form.get_by_label("Folds").fill("3")
    form.get_by_role("button", name="Train").click()
    b.page.wait_for_url("**/ui/jobs/*")
    job_id = int(b.page.url.rsplit("/", 1)[1])
    params = api(server, "GET", f"/jobs/{job_id}")["params"]
    try:  # not needed further: spare the machine
        api(server, "POST", f"/jobs/{job_id}/cancel")
    except HTTPError as exc:  # 409: it already ended (a quick search of a small set can)
        assert exc.code == 409, exc
    assert (params["test_fraction"], params["calibration"], params["seed"]) == (0.25, "isotonic", 7)
    assert (params["search"]["grid"], params["search"]["cv"]) == ("quick", 3)
    assert b.console_errors == [], b.console_errors


def kv(b: Browser, box: str) -> dict[str, str]:
    """A UI.kv block's first-level terms and values."""
    return b.page.locator(box + " > dl.kv").evaluate(
        "dl => Object.fromEntries([...dl.children].filter(n => n.tagName === 'DT')"
        ".map(dt => [dt.textContent, dt.nextElementSibling.textContent]))")


def test_job_page_shows_the_hyper_parameters_the_model_used(site):
    server, seeded, b = site
    linear = seeded["linear"]
    # the job keeps the request's top-level default beside params' value, which the fit used
    top = linear["params"]["beta"]
    assert top != 2.0 and linear["params"]["params"] == {"beta": 2.0}
    drawn(b, f"/ui/jobs/{linear['id']}", "#job-used")
    used, request = kv(b, "#job-used"), kv(b, "#job-request")
    model = api(server, "GET", f"/models/{linear['model_id']}")
    assert model["params"]["beta"] == 2.0 and used["beta"] == "2"
    assert "beta" not in request and "params" not in request
    assert request["test_fraction"] == "0.25" and request["algorithm"] == "msvmav"
    assert not set(used) & {"gamma", "degree", "coef0"}, used  # the linear kernel's only

    searched = seeded["searched"]
    drawn(b, f"/ui/jobs/{searched['id']}", "#job-used")
    used = kv(b, "#job-used")
    best = searched["result"]["best_params"]
    model = api(server, "GET", f"/models/{searched['model_id']}")["params"]
    for name in ("alpha", "beta", "gamma"):
        assert model[name] == best[name]
        assert used[name] == b.page.evaluate("v => UI.num(v)", best[name]), name
    assert b.console_errors == [], b.console_errors


def test_model_page_draws_the_cv_table_the_curves_and_only_its_kernels_parameters(site):
    server, seeded, b = site
    searched = seeded["searched"]
    model = api(server, "GET", f"/models/{searched['model_id']}")
    drawn(b, pages(seeded)["model"], "#curves svg")
    text = b.page.locator("#app").inner_text()
    assert "[object Object]" not in text and '"mean_accuracy"' not in text
    rows = b.page.locator("#cv-table tbody tr")
    assert rows.count() == model["search"]["n_configs"] == 27
    assert "(chosen)" in b.page.locator("#cv-table tr.best").inner_text()
    best = max(r["mean_accuracy"] for r in model["search"]["table"])
    assert rows.first.locator("td").nth(4).inner_text() == b.page.evaluate("v => UI.num(v)", best)
    charts = b.page.locator("#curves svg")
    labels = charts.evaluate_all("ss => ss.map(s => s.getAttribute('aria-label'))")
    assert [x.split(" (")[0] for x in labels] == ["ROC curve", "Precision-recall curve",
                                                  "Reliability"]
    for i in range(3):
        assert len(charts.nth(i).locator("polyline").first.get_attribute("points").split()) >= 2
    shown = set(kv(b, "#model-params"))
    assert {"gamma", "alpha", "beta", "approximation"} <= shown
    assert not shown & {"degree", "coef0", "fit_intercept"}, shown

    drawn(b, pages(seeded)["linear model"], "#model-params")
    shown = set(kv(b, "#model-params"))
    assert {"alpha", "beta", "fit_intercept"} <= shown
    assert not shown & {"gamma", "degree", "coef0", "approximation", "kernel_tol",
                        "n_components", "kernel_memory_mb"}, shown
    assert b.console_errors == [], b.console_errors


def test_at_390_px_no_page_scrolls_sideways_and_roll_back_is_on_screen(site):
    _server, seeded, b = site
    b.page.set_viewport_size({"width": 390, "height": 844})
    try:
        for name, path in pages(seeded).items():
            drawn(b, path)
            wide = b.page.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, (name, wide)
        drawn(b, pages(seeded)["registered model"], "#aliases")
        button = b.page.get_by_role("button", name="Roll back production")
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    finally:
        b.page.set_viewport_size({"width": 1280, "height": 900})
    assert b.console_errors == [], b.console_errors


def test_two_rollbacks_in_the_browser_walk_back(site):
    server, _seeded, b = site
    drawn(b, "/ui/registry/walk", "#aliases")
    notices = []
    for _ in range(2):
        b.page.once("dialog", lambda d: d.accept())
        b.page.get_by_role("button", name="Roll back production").click()
        notice = b.page.locator("#alias-out .success")
        notice.wait_for()
        notices.append(notice.inner_text())
    assert notices == ["production rolled back from version 3 to version 2.",
                       "production rolled back from version 2 to version 1."]
    assert api(server, "GET", "/registered-models/walk")["aliases"] == {"production": 1}
    row = b.page.locator("#aliases").get_by_role("row", name="production")
    assert row.locator("td").first.inner_text() == "1"
    assert b.console_errors == [], b.console_errors


def test_training_form_offers_the_auto_search_and_its_budget(site):
    server, seeded, b = site
    drawn(b, pages(seeded)["dataset"], "form")
    form = b.page.get_by_role("form", name="Train a model")
    # the defaults: the auto search, the kernel chosen by it
    assert form.get_by_label("Search", exact=True).input_value() == "auto"
    assert form.get_by_label("Kernel").input_value() == ""
    form.get_by_label("Budget (s)").fill("7")
    form.get_by_role("button", name="Train").click()
    b.page.wait_for_url("**/ui/jobs/*")
    job_id = int(b.page.url.rsplit("/", 1)[1])
    params = api(server, "GET", f"/jobs/{job_id}")["params"]
    api(server, "POST", f"/jobs/{job_id}/cancel")  # not needed further: spare the machine
    assert params["search"]["grid"] == "auto" and params["search"]["budget_seconds"] == 7
    assert params["search"]["cv"] == 3 and params["search"]["kernels"] == ["linear", "rbf"]
    assert b.console_errors == [], b.console_errors


#: GET /models/{id}'s fit_path of an RBF model of diabetes.arff (quick search, max_iter 100)
FIT_PATH = {"linear_solver": None, "kernel_approximation": "exact", "fit_info": {
    "inverse_builds": 1, "inverse_updates": 58, "last_relative_change": 7.514146869874995e-05,
    "stop": "objective", "warning": "the fit did not converge: it stopped at max_iter=100 before "
    "meeting its stopping rule (the objective SV/theta^2 changing by at most 0.0001 per "
    "iteration (relative, over the last 5)); the model is the last iterate. Raise max_iter, or "
    "choose other alpha, beta (a search)"}}


def test_at_390_px_a_nested_list_with_long_keys_stays_on_the_page(site):
    """An RBF model's fit path, as diabetes.arff's quick search draws it: the nested fit_info
    list's key column took the width of ``last_relative_change`` and left the values none, so
    they overflowed (the page scrolled sideways by 4 px at 390 px) and the fit's warning was
    drawn one letter a line (a model page 14,000 px tall)."""
    _server, seeded, b = site
    b.page.set_viewport_size({"width": 390, "height": 844})
    try:
        drawn(b, pages(seeded)["model"])
        b.page.evaluate("""fitPath => { const cols = document.createElement("div");
          cols.className = "cols";
          cols.append(UI.section("Fit path", UI.kv(fitPath)), UI.section("Convergence"));
          document.getElementById("app").append(cols); }""", FIT_PATH)
        wide = b.page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 390, wide
        # each value has room to be read: the warning ran one letter a line, 8,000 px tall
        widths = b.page.evaluate("""() => [...document.querySelectorAll(
          "#app > .cols:last-child dl.kv dl.kv dd")].map(d => d.getBoundingClientRect().width)""")
        assert len(widths) == 5 and min(widths) >= 150, widths
    finally:
        b.page.set_viewport_size({"width": 1280, "height": 900})
    assert b.console_errors == [], b.console_errors


def test_on_a_wide_screen_each_parameter_name_is_one_line(site):
    """At 1280 px the parameters' names keep their width (a key column capped at half the
    list, meant for phones, broke kernel_memory_mb over two lines beside the summary)."""
    _server, seeded, b = site
    drawn(b, pages(seeded)["model"], "#model-params")
    heights = b.page.evaluate("""() => [...document.querySelectorAll("#model-params dt")]
      .map(d => [d.textContent, d.getBoundingClientRect().height])""")
    one_line = min(h for _, h in heights)
    assert "kernel_memory_mb" in dict(heights)
    assert [k for k, h in heights if h > one_line] == [], heights
