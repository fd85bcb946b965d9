"""Prediction ids given to the protocol routes (one per row, a string of 1 to 128 characters
or an integer, as /predict's ``ids``), checked before any row is scored; a wrong one is the
protocols' 400 naming the row (``ids[3]``)."""

from __future__ import annotations

from typing import Any

from app.core.problems import Problem, _field_name, invalid
from app.protocols.errors import as_client_error

MAX_ID_LENGTH = 128


def _refused(loc: list[str | int], message: str, *, v2: bool) -> Problem:
    return as_client_error(invalid(loc, f"{_field_name(loc)} {message}"), "ids", v2=v2)


def check_ids(ids: Any, n: int, loc: list[str | int], *, v2: bool) -> list[Any]:
    """``ids`` when it is a list of one valid id per row; else a 400 naming ``loc`` (the ids'
    place in the request, e.g. ``["parameters", "ids"]``) and the row."""
    if not isinstance(ids, list):
        raise _refused(loc, "must be a list of ids, one per row", v2=v2)
    if len(ids) != n:
        raise _refused(loc, f"{len(ids)} ids for {n} rows; give one per row", v2=v2)
    for row, value in enumerate(ids):
        if type(value) is int or (isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH):
            continue
        shown = f"a string of {len(value)} characters" if isinstance(value, str) else repr(value)
        raise _refused(
            [*loc, row],
            f"(row {row}) must be a string of 1 to {MAX_ID_LENGTH} characters or an "
            f"integer; got {shown[:60]}",
            v2=v2,
        )
    return ids
