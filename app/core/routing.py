"""Which methods a static path (one without parameters, such as ``/models/import``) answers.

Starlette tries routes in order and takes the first that matches path and method, so
``GET /models/import`` (only POST there) fell through to ``GET /models/{model_id}`` and was a
422 for the id "import", and ``OPTIONS`` advertised GET for it. A path that some route serves
literally belongs to its static routes: a method they do not take is a 405 whose ``Allow``
lists theirs (``app.core.middleware.StaticPathMethods``, ``app.core.problems``).

The map is read off the routes' own ``path`` and ``methods``: the app's routes and those of the
routers it included (``record_included``: each router with the prefix it is included under, so
a route's path in the app is that prefix and its own path). FastAPI's ``iter_route_contexts``
lists the same routes, but builds every included route's dependencies and response models to
do so: ~90 ms on the first request of every app, where routing a request builds only the
routers it tries.
``tests/app/test_static_paths.py`` checks that both give the same map."""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import APIRouter
from starlette.routing import BaseRoute, Router

# Attributes under which a router keeps its map (path -> methods), built on first use, and the
# routers included into it.
_CACHE_ATTRIBUTE = "_msvmav_static_methods"
_INCLUDED_ATTRIBUTE = "_msvmav_included_routers"
_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def record_included(router: Router, included: Iterable[tuple[str, APIRouter]]) -> None:
    """Note the routers ``router`` included, each with its prefix: their routes are part of
    its static map."""
    setattr(router, _INCLUDED_ATTRIBUTE, (*getattr(router, _INCLUDED_ATTRIBUTE, ()), *included))


def static_map_of(routes: Iterable[BaseRoute], prefix: str = "") -> dict[str, tuple[str, ...]]:
    """path -> methods (in _ORDER) of the routes with methods and a path without parameters
    (each route's path after ``prefix``, the one its router is included under)."""
    return _ordered(_found(routes, prefix, {}))


def _found(routes: Iterable[BaseRoute], prefix: str, found: dict[str, set[str]]
           ) -> dict[str, set[str]]:
    for route in routes:
        methods, path = getattr(route, "methods", None), getattr(route, "path", None)
        if methods and path is not None and prefix + path and "{" not in path:
            found.setdefault(prefix + path, set()).update(methods)
    return found


def _ordered(found: dict[str, set[str]]) -> dict[str, tuple[str, ...]]:
    return {path: tuple(m for m in _ORDER if m in methods) for path, methods in found.items()}


def _static_map(router: Router) -> dict[str, tuple[str, ...]]:
    cached = getattr(router, _CACHE_ATTRIBUTE, None)
    if cached is not None:
        return cached
    found = _found(router.routes, "", {})
    for prefix, included in getattr(router, _INCLUDED_ATTRIBUTE, ()):
        _found(included.routes, prefix, found)
    static = _ordered(found)
    setattr(router, _CACHE_ATTRIBUTE, static)
    return static


def static_methods(router: Router | None, path: str) -> tuple[str, ...] | None:
    """The methods the static routes of ``path`` answer, or None if no route serves ``path``
    literally (the routes are fixed once the app is built: the map is computed once)."""
    if router is None:
        return None
    return _static_map(router).get(path)
