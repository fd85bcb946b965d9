"""Figures for the API, rendered with ``solver.plots`` one at a time (pyplot keeps global
state, and route handlers run in a thread pool)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_LOCK = threading.Lock()


def render_margin_cdf(curves: Mapping[str, Any], *, title: str, fmt: str) -> bytes:
    """PNG or SVG bytes of ``solver.plots.plot_margin_cdf``."""
    from solver.plots import plot_margin_cdf

    with _LOCK:
        return plot_margin_cdf(curves, title=title, fmt=fmt)
