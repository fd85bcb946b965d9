"""The monitoring report as one PNG: reference and live cumulative decision-value curves, and
the daily accuracy and θ̂ of the rows with feedback. Rendered with matplotlib's object API on
the Agg canvas (no pyplot state), one figure at a time, in the route's worker thread."""

from __future__ import annotations

import io
import threading
from datetime import date
from typing import Any

import numpy as np

WIDTH_PX = 1200
HEIGHT_PX = 450
DPI = 100
_LOCK = threading.Lock()


def _ecdf(ax: Any, values: np.ndarray, label: str) -> None:
    x = np.sort(values)
    ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=f"{label} (n={x.size})")


def _curves(ax: Any, reference: np.ndarray | None, live: np.ndarray, theta: float | None) -> None:
    if reference is not None and reference.size:
        _ecdf(ax, reference, "reference (training part)")
    if live.size:
        _ecdf(ax, live, "live (logged)")
    if theta is not None:
        for x in (-theta, theta):
            ax.axvline(x, color="grey", linestyle=":", linewidth=1)
    if (reference is None or not reference.size) and not live.size:
        ax.text(0.5, 0.5, "no decision values", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(loc="lower right", fontsize="small")
    ax.set_xlabel("decision value f(x)  (dotted: ±θ̂ of the training part)")
    ax.set_ylabel("cumulative share")
    ax.set_title("decision values: reference and live")
    ax.grid(alpha=0.3)


def _daily(ax: Any, daily: list[dict[str, Any]]) -> None:
    ax.set_title("rows with feedback, per day predicted")
    ax.set_xlabel("day (UTC)")
    ax.grid(alpha=0.3)
    if not daily:
        ax.text(0.5, 0.5, "no feedback yet", ha="center", va="center", transform=ax.transAxes)
        return
    days = [date.fromisoformat(d["day"]) for d in daily]
    ax.plot(days, [d["accuracy"] for d in daily], marker="o", label="accuracy")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    twin = ax.twinx()
    twin.plot(days, [d["mean"] for d in daily], marker="s", color="tab:orange", label="θ̂")
    twin.set_ylabel("θ̂ (mean margin)")
    lines = ax.get_lines() + twin.get_lines()
    ax.legend(lines, [line.get_label() for line in lines], loc="lower left", fontsize="small")
    from matplotlib.dates import DateFormatter

    if len(days) <= 10:
        ax.set_xticks(days)
    ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d"))
    ax.tick_params(axis="x", labelrotation=30)


def render(
    *,
    reference: np.ndarray | None,
    live: np.ndarray,
    theta: float | None,
    daily: list[dict[str, Any]],
    title: str,
) -> bytes:
    """PNG bytes, ``WIDTH_PX`` × ``HEIGHT_PX``: left the two cumulative curves, right the
    daily accuracy and θ̂ (``report.labelled``'s ``daily``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # (imported on first use)
    from matplotlib.figure import Figure

    with _LOCK:
        fig = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
        FigureCanvasAgg(fig)
        left, right = fig.subplots(1, 2)
        _curves(left, reference, live, theta)
        _daily(right, daily)
        fig.suptitle(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
        return buf.getvalue()
