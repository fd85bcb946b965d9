"""Database ids as the API accepts them.

Every table's id is an ``INTEGER`` (32-bit on PostgreSQL), so an id outside 1 … 2^31 − 1 can
name no row: in a body it is a 422 naming the field (``DbId``), in a query a 422 naming the
parameter and in a path a 404 (both ``check_ids``) — never a database overflow error. An id
that is not an integer's text (whitespace around it included) is a 422 naming it. An integer's
text is decimal digits, signed or not, with or without a zero fraction: ``30.0`` is 30, as the
OpenAPI document's ``integer`` (JSON Schema's: a number whose fraction is zero) and pydantic's
reading of every other integer parameter have it.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Request
from pydantic import BeforeValidator, Field

from app.core.problems import invalid, not_found

MAX_DB_ID = 2**31 - 1

def _whole(value: object) -> object:
    """A JSON number with a zero fraction (``5.0``) is the integer JSON Schema says it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


Whole = Annotated[int, BeforeValidator(_whole)]
"""An integer field of a request body: a JSON integer, or a number with a zero fraction
(``5.0`` is 5, as the document's ``type: integer`` allows); in a strict model ``"5"`` and
``true`` stay refused (pydantic's strict int refuses every float, which the document allows)."""


def whole_in(low: int, high: int) -> object:
    """``Whole`` between ``low`` and ``high``, for a union (``whole_in(1, 9) | None``): the
    bounds sit on the integer inside the validator, where the document's ``minimum`` and
    ``maximum`` come from (outside it, pydantic writes ``ge``/``le`` into the document)."""
    return Annotated[int, Field(ge=low, le=high), BeforeValidator(_whole)]


DbId = Annotated[int, Field(strict=True, ge=1, le=MAX_DB_ID), BeforeValidator(_whole)]
"""An id in a request body: a JSON integer in 1 … 2^31 − 1 (``5.0`` is 5; ``"5"`` is refused)."""

# Whole text only: "$" also matches before a final newline, and pydantic strips whitespace from
# an integer's text, so "6\n" named id 6 (GET /keys/6%0A answered 200).
_INTEGER = re.compile(r"[+-]?[0-9]+(?:\.0+)?", re.ASCII)
#: The 422 message of an id that is not an integer's text (app.error_examples documents it).
NOT_AN_ID = "Input should be a valid integer: decimal digits only (a zero fraction allowed)"


def in_range(value: int) -> bool:
    return 1 <= value <= MAX_DB_ID


def _out_of_range(text: str) -> bool:
    """``text`` is a decimal integer (any length) outside 1 … 2^31 − 1."""
    if not _INTEGER.fullmatch(text):
        return False  # not an integer: refused by check_ids (a 422)
    digits = text.split(".", 1)[0].lstrip("+-").lstrip("0")
    return text.startswith("-") or len(digits) > 10 or not in_range(int(digits or "0"))


async def check_ids(request: Request) -> None:
    """App-wide dependency, run before a route's own parameters are validated: a path
    parameter ``<kind>_id`` out of range is that kind's 404, a query parameter ``*_id`` out of
    range a 422 naming it. Async (no I/O): no trip to the thread pool on every request."""
    for name, value in request.path_params.items():
        if not (name.endswith("_id") and isinstance(value, str)):
            continue
        if not _INTEGER.fullmatch(value):
            raise invalid(["path", name], NOT_AN_ID)
        if _out_of_range(value):
            raise not_found(name.removesuffix("_id").replace("_", " "), value)
    for name, value in request.query_params.items():
        if not name.endswith("_id"):
            continue
        if not _INTEGER.fullmatch(value):
            raise invalid(["query", name], NOT_AN_ID)
        if _out_of_range(value):
            raise invalid(["query", name], f"must be an id between 1 and {MAX_DB_ID}")
