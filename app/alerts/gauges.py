"""The monitoring gauges on /metrics, per watched model and target: the values of the last
window the alert evaluator evaluated (``AlertRule.last_window``; one small read per scrape,
never the log itself). A target is a rule's ``model`` reference (``wdbc@production``) or its
stored model's id; of several rules on one target, the newest window's values are given."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.alerts.orm import AlertRule

#: Gauge name -> the window value it shows.
GAUGES = {
    "msvmav_monitoring_estimated_accuracy": ("estimated_accuracy", "Label-free accuracy "
                                             "estimate (CBPE) of the last evaluated window."),
    "msvmav_monitoring_realised_accuracy": ("realised_accuracy", "Accuracy of the last "
                                            "evaluated window's rows with feedback."),
    "msvmav_monitoring_drift_statistic": ("drift_statistic", "KS statistic of the decision "
                                          "values, reference against the last window."),
    "msvmav_monitoring_clipped_share": ("clipped_share", "Share of the last window's rows "
                                        "with an input outside the training range."),
    "msvmav_monitoring_margin_density": ("margin_density", "Share of the last window's rows "
                                         "inside the training margin band."),
    "msvmav_monitoring_unreliable": ("unreliable", "1 when the last window's estimate is "
                                     "unreliable, 0 when reliable."),
    "msvmav_monitoring_window_rows": ("rows", "Logged rows in the last evaluated window."),
}


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def latest_windows(session: Session) -> dict[str, dict[str, Any]]:
    """Target label -> the newest evaluated window of any rule on it."""
    rows = session.execute(select(AlertRule.model_id, AlertRule.model, AlertRule.last_window)
                           .where(AlertRule.last_window.is_not(None))).all()
    newest: dict[str, dict[str, Any]] = {}
    for model_id, reference, window in rows:
        if not isinstance(window, dict) or "values" not in window:
            continue
        target = reference or str(model_id)
        held = newest.get(target)
        if held is None or str(window["until"]) > str(held["until"]):
            newest[target] = window
    return newest


def gauge_lines(session: Session) -> list[str]:
    windows = latest_windows(session)
    session.commit()
    lines: list[str] = []
    for name, (key, help_text) in GAUGES.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for target in sorted(windows):
            value = windows[target]["values"].get(key)
            if value is None:
                continue
            labels = f'model="{windows[target]["model_id"]}",target="{_esc(target)}"'
            lines.append(f"{name}{{{labels}}} {float(value)!r}")
    return lines
