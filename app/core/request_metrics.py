"""Prometheus text exposition, kept by hand (no client library): request counters per route and
status and request latency sums. (Job counts per status are ``app.jobs.gauges``'.)"""

from __future__ import annotations

import threading
from collections import defaultdict

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.routing import BaseRoute, Match
from starlette.types import Scope


class RequestMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[tuple[str, str, int], int] = defaultdict(int)
        self._seconds: dict[tuple[str, str], float] = defaultdict(float)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._count[(method, route, status)] += 1
            self._seconds[(method, route)] += seconds

    def render(self) -> list[str]:
        with self._lock:
            count = sorted(self._count.items())
            secs = sorted(self._seconds.items())
        answered: dict[tuple[str, str], int] = defaultdict(int)  # the summary's _count
        for (method, route, _status), n in count:
            answered[(method, route)] += n
        lines = [
            "# HELP msvmav_http_requests_total HTTP requests by method, route and status.",
            "# TYPE msvmav_http_requests_total counter",
        ]
        for (method, route, status), n in count:
            labels = f'method="{method}",route="{_esc(route)}",status="{status}"'
            lines.append(f"msvmav_http_requests_total{{{labels}}} {n}")
        lines += [
            "# HELP msvmav_http_request_duration_seconds Time spent answering requests.",
            "# TYPE msvmav_http_request_duration_seconds summary",
        ]
        for (method, route), s in secs:
            labels = f'method="{method}",route="{_esc(route)}"'
            n = answered[(method, route)]
            lines.append(f"msvmav_http_request_duration_seconds_sum{{{labels}}} {s:.6f}")
            lines.append(f"msvmav_http_request_duration_seconds_count{{{labels}}} {n}")
        return lines


#: The route label of a request that no route matches (a 404).
UNMATCHED = "<unmatched>"


def route_label(scope: Scope) -> str:
    """The template of the route that answers (or would have answered) this request. A request
    answered before routing (a 401, or a 500 raised in the auth middleware) has no
    ``scope["route"]``: its route is found by matching the app's routes, so that it is counted
    under its route and not as ``<unmatched>``."""
    route = scope.get("route") or _matching_route(scope)
    return getattr(route, "path", None) or UNMATCHED


def _matching_route(scope: Scope) -> BaseRoute | RouteContext | None:
    """The route that matches path and method, else the first that matches the path (a 405).
    FastAPI's ``iter_route_contexts`` lists the routes inside included routers too."""
    router = getattr(scope.get("app"), "router", None)
    partial = None
    for route in iter_route_contexts(getattr(router, "routes", ())):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
        if match is Match.PARTIAL and partial is None:
            partial = route
    return partial


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
