"""Acceptance of issue 47: on shifted windows of public data sets the verdict's limits were not
chosen on (kc1, phishing; they were chosen on magic's windows: docs/monitoring.md), built through
the real service (train, predict the window's rows, post their labels, fetch the report:
tests/app/shift_windows.py) — an unshifted control, covariate shift inside the training range
(two features, both halves), one input inflated x 1e4, label-prior shift (balanced, skewed) —
the estimate is within 0.05 of the realised accuracy or marked unreliable with a reason, on
every window, and its interval covers the realised accuracy on at least 90 % of the windows it
calls reliable.

Both verdicts are checked. The report's ``verdict`` also marks a window whose realised
accuracy (from the feedback posted here) falls outside the interval, so on it both properties
hold nearly by construction; ``label_free_verdict``, the one the window's inputs give, is the
claim, held on every window, label-prior shift included (the ``label_shift`` reason: a shift of
the class priors the window cannot rule out would move the accuracy beyond 0.05). On kc1 the
linear model is barely better than its majority class (it predicts the minority on 3 % of the
rows), so no window of 400 rows can show whether the priors moved: even the control is marked
``label_shift``; on phishing the control is trusted. The realised accuracy is computed here
from the answered labels and the true ones, and must equal the report's."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app import shift_windows
from tests.app.support import run_jobs

# (data set, window rows, the control's reason codes: none when it is trusted)
CHECK_SETS = [("kc1", 400, ["label_shift"]), ("phishing", 400, [])]

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture(autouse=True)
def _data_here():
    if not shift_windows.DATA.exists():
        pytest.skip(f"{shift_windows.DATA} is not here")


@pytest.mark.parametrize(("name", "size", "control_codes"), CHECK_SETS)
def test_the_estimate_is_right_or_says_it_is_not(client, worker, name, size, control_codes):
    def finish(job_id: int) -> int:
        assert run_jobs(worker) == ["succeeded"]
        return client.get(f"/jobs/{job_id}").json()["model_id"]

    windows = shift_windows.run_set(client, name, size, finish)["windows"]
    assert {w["window"].split(":")[0] for w in windows} == {"control", "high", "low",
                                                            "inflated", "prior"}
    for w in windows:
        assert w["report_realised"] == pytest.approx(w["realised"], abs=1e-12)
        for key in ("verdict_with_feedback", "verdict"):
            if w[key] == "reliable":
                assert abs(w["estimate"] - w["realised"]) <= 0.05, (key, w["window"])
            else:
                assert w[key] == "unreliable" and w["reasons"], (key, w["window"])
        if w["verdict_with_feedback"] == "unreliable":
            assert "unreliable_estimate" in w["warnings"]
    for key in ("verdict_with_feedback", "verdict"):
        trusted = [w for w in windows if w[key] == "reliable"]
        covered = np.mean([w["low"] <= w["realised"] <= w["high"] for w in trusted] or [1.0])
        assert covered >= 0.9, [(w["window"], w["low"], w["realised"], w["high"])
                                for w in trusted]
    by_name = {w["window"]: w for w in windows}
    control = by_name["control"]
    assert control["codes"] == control_codes  # (phishing: not vacuous, the control is trusted)
    assert (control["verdict"] == "reliable") == (not control_codes)
    inflated = next(w for w in windows if w["window"].startswith("inflated:"))
    assert "out_of_range" in inflated["codes"] and "clipped_inputs" in inflated["warnings"]


def test_a_label_prior_shift_the_inputs_barely_show_is_marked(client, worker):
    """Regression (issue 47): magic's balanced window (seed 1; the classes overlap, so the
    inputs barely move) is 0.09 off the confidence-based estimate, and was called reliable
    when the label-shift check was BBSE's; the maximum-likelihood priors mark it."""
    frame = shift_windows.load("magic")
    cut = int(len(frame) * shift_windows.TRAIN_FRACTION)
    train, pool = frame.iloc[:cut], frame.iloc[cut:]

    def finish(job_id: int) -> int:
        assert run_jobs(worker) == ["succeeded"]
        return client.get(f"/jobs/{job_id}").json()["model_id"]

    model_id = shift_windows.train_model(client, train, finish)
    rows = dict(shift_windows.windows(train, pool, 400, seed=1))["prior:balanced"]
    w = shift_windows.run_window(client, model_id, "prior:balanced", rows, "b-")
    assert abs(w["estimate"] - w["realised"]) > 0.05  # (not vacuous: the estimate is off)
    assert w["verdict"] == "unreliable" and "label_shift" in w["codes"], w["reasons"]
    shift = w["label_shift"]
    assert shift["priors_window"][1] > shift["priors_reference"][1] + 0.05  # toward 0.5
