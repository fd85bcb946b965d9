"""Figures for the API, rendered with ``solver.plots`` one at a time (pyplot keeps global
state, and route handlers run in a thread pool)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter, Response

from app.core.problems import problem_responses

_LOCK = threading.Lock()

#: the image formats the API renders, and their media types
IMAGE_TYPES = {"png": "image/png", "svg": "image/svg+xml"}


def image_response_doc(fmt: str) -> dict:
    """OpenAPI 200 response of an image route: a binary string of the format's media type."""
    schema = {"schema": {"type": "string", "format": "binary"}}
    return {"description": f"{fmt.upper()} image", "content": {IMAGE_TYPES[fmt]: schema}}


def add_image_routes(
    router: APIRouter,
    path: str,
    make_handler: Callable[[str], Callable[..., Response]],
    *,
    name: str,
    summary: str,
    description: str,
    errors: tuple[int, ...],
) -> None:
    """``GET {path}.{fmt}`` for each of ``IMAGE_TYPES``, operation id ``{name}_{fmt}``.

    ``make_handler(fmt)`` returns that route's handler: its parameters are the route's and it
    answers the image; ``errors`` are the problem+json statuses to document."""
    for fmt in IMAGE_TYPES:
        router.get(
            f"{path}.{fmt}",
            name=f"{name}_{fmt}",
            summary=f"{summary} ({fmt.upper()})",
            description=description,
            response_class=Response,
            responses={200: image_response_doc(fmt), **problem_responses(*errors)},
        )(make_handler(fmt))


def render_margin_cdf(curves: Mapping[str, Any], *, title: str, fmt: str) -> bytes:
    """PNG or SVG bytes of ``solver.plots.plot_margin_cdf``."""
    from solver import plot_margin_cdf

    with _LOCK:
        return plot_margin_cdf(curves, title=title, fmt=fmt)
