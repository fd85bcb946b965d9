"""Figures for the API, rendered with ``solver.plots`` one at a time (pyplot keeps global
state, and route handlers run in a thread pool)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_LOCK = threading.Lock()

#: the image formats the API renders, and their media types
IMAGE_TYPES = {"png": "image/png", "svg": "image/svg+xml"}


def image_response_doc(fmt: str) -> dict:
    """OpenAPI 200 response of an image route: a binary string of the format's media type."""
    schema = {"schema": {"type": "string", "format": "binary"}}
    return {"description": f"{fmt.upper()} image", "content": {IMAGE_TYPES[fmt]: schema}}


def render_margin_cdf(curves: Mapping[str, Any], *, title: str, fmt: str) -> bytes:
    """PNG or SVG bytes of ``solver.plots.plot_margin_cdf``."""
    from solver.plots import plot_margin_cdf

    with _LOCK:
        return plot_margin_cdf(curves, title=title, fmt=fmt)
