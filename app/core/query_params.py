"""Unknown query parameters are a 422, not silently ignored: ``GET /models?dataset=5`` (a typo
for ``dataset_id``) must not answer every model as if it had been filtered."""

from __future__ import annotations

from fastapi import Request
from fastapi.routing import APIRoute

from app.core.deps import READ_METHODS
from app.core.problems import invalid

# Attribute under which a route keeps its accepted names (routes are not hashable).
_CACHE_ATTRIBUTE = "_msvmav_query_parameters"


def accepted_query_parameters(route: APIRoute) -> frozenset[str]:
    """The query parameters ``route`` declares, its dependencies' included (by alias);
    computed once per route."""
    cached = getattr(route, _CACHE_ATTRIBUTE, None)
    if cached is not None:
        return cached
    names: set[str] = set()
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        names.update(field.alias for field in dependant.query_params)
        pending.extend(dependant.dependencies)
    accepted = frozenset(names)
    setattr(route, _CACHE_ATTRIBUTE, accepted)
    return accepted


async def reject_unknown_query(request: Request) -> None:
    """App-wide dependency: a GET or HEAD request with a query parameter its route does not
    take is a 422 naming the parameter and listing those it takes. Async, no I/O."""
    if not request.query_params or request.method not in READ_METHODS:
        return
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    accepted = accepted_query_parameters(route)
    for name in request.query_params:
        if name not in accepted:
            takes = ", ".join(sorted(accepted)) or "none"
            raise invalid(["query", name], f"unknown query parameter (this route takes: {takes})")
