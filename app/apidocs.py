"""ReDoc served by the service itself, with no request to any other host.

fastapi-offline serves Swagger UI's and ReDoc's scripts from its package data (mounted at
``/static-offline-docs``), but ReDoc's bundle still draws its "API docs by Redocly" logo from
Redocly's CDN (an ``<img>`` in the side menu). The service serves that bundle from its own
mount with the logo's URL replaced by an empty ``data:`` URL: the image fails to decode, ReDoc's
``onError`` hides it, and the page asks nothing of any other host (no logo is shown)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route, Router

REDOC_ASSETS_URL = "/static-offline-redoc"
REDOC_JS = "redoc.standalone.js"
_BUNDLE = Path(fastapi_offline.__file__).parent / "static" / REDOC_JS
# The logo's absolute URL in the bundle, whatever host it names.
_REMOTE_LOGO = re.compile(rb"https://[^\"'\s]+/logo-mini\.svg")
_NO_LOGO = b"data:,"


@lru_cache(maxsize=1)
def redoc_bundle() -> bytes:
    """fastapi-offline's ReDoc bundle without the CDN logo (read once)."""
    return _REMOTE_LOGO.sub(_NO_LOGO, _BUNDLE.read_bytes())


def _redoc_js(_request: Request) -> Response:
    # sync: Starlette runs it in the thread pool, so the first read is off the event loop
    return Response(
        redoc_bundle(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )


def install_redoc(app: FastAPI, redoc_url: str, static_url: str) -> None:
    """``redoc_url``: the ReDoc page, its script from ``REDOC_ASSETS_URL`` and its favicon from
    fastapi-offline's mount at ``static_url``."""
    app.mount(REDOC_ASSETS_URL, Router(routes=[Route(f"/{REDOC_JS}", _redoc_js)]))

    @app.get(redoc_url, include_in_schema=False)
    async def redoc_html(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=app.title + " - ReDoc",
            redoc_js_url=f"{root}{REDOC_ASSETS_URL}/{REDOC_JS}",
            with_google_fonts=False,
            redoc_favicon_url=f"{root}{static_url}/favicon.png",
        )
