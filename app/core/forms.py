"""Multipart and URL-encoded forms: a field the route does not take is a 422 naming it (as an
unknown query parameter is, ``app.core.query_params``), never silently ignored (``labl=…``)."""

from __future__ import annotations

from fastapi import Depends, Request

from app.core.problems import invalid

_FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


async def reject_unknown_fields(request: Request) -> None:
    """422 naming the first form field that is none of the route's body parameters. FastAPI
    has already read the form (it reads the body before the dependencies), so this reads the
    parsed form again, not the body."""
    if not request.headers.get("content-type", "").startswith(_FORM_TYPES):
        return
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = {p.alias for p in dependant.body_params}
    given = set((await request.form()).keys())
    if any(p.field_info.is_required() and p.alias not in given for p in dependant.body_params):
        return  # a required field is missing: validation names it first (say, `file`)
    unknown = sorted(given - known)
    if unknown:
        raise invalid(["body", unknown[0]], f"unknown form field {unknown[0]!r}; this route "
                      f"takes {', '.join(sorted(known))}")


#: For a route's ``dependencies=[...]``.
KNOWN_FORM_FIELDS = Depends(reject_unknown_fields)
