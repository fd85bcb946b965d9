"""Which methods a static path (one without parameters, such as ``/models/import``) answers.

Starlette tries routes in order and takes the first that matches path and method, so
``GET /models/import`` (only POST there) fell through to ``GET /models/{model_id}`` and was a
422 for the id "import", and ``OPTIONS`` advertised GET for it. A path that some route serves
literally belongs to its static routes: a method they do not take is a 405 whose ``Allow``
lists theirs (``app.core.middleware.StaticPathMethods``, ``app.core.problems``)."""

from __future__ import annotations

from fastapi.routing import iter_route_contexts
from starlette.routing import Router

# Attribute under which a router keeps its map (path -> methods), built on first use.
_CACHE_ATTRIBUTE = "_msvmav_static_methods"
_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _static_map(router: Router) -> dict[str, tuple[str, ...]]:
    cached = getattr(router, _CACHE_ATTRIBUTE, None)
    if cached is not None:
        return cached
    found: dict[str, set[str]] = {}
    for route in iter_route_contexts(router.routes):  # (the included routers' routes too)
        methods, path = route.methods, route.path
        if methods and path and "{" not in path:
            found.setdefault(path, set()).update(methods)
    static = {path: tuple(m for m in _ORDER if m in methods) for path, methods in found.items()}
    setattr(router, _CACHE_ATTRIBUTE, static)
    return static


def static_methods(router: Router | None, path: str) -> tuple[str, ...] | None:
    """The methods the static routes of ``path`` answer, or None if no route serves ``path``
    literally (the routes are fixed once the app is built: the map is computed once)."""
    if router is None:
        return None
    return _static_map(router).get(path)
