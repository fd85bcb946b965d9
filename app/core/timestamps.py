"""Timestamps a client sends (``since``/``until`` of the monitoring reports, a key's
``expires_at``): RFC 3339 / ISO 8601 text only.

Accepted: ``YYYY-MM-DD`` (midnight), or ``YYYY-MM-DDTHH:MM[:SS[.ffffff]]`` optionally followed
by ``Z`` or an offset ``±HH:MM``; without an offset the time is UTC. Refused with a 422 naming
the field: numbers (pydantic would take ``until=0.5`` as 0.5 s after the Unix epoch), text
with a space for ``T``, week or ordinal dates, more than 6 decimals of a second, and an instant
whose offset carries it out of years 1-9999 once in UTC (``9999-12-31T23:59:59-23:59``). The
value is a timezone-aware UTC ``datetime``."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

TIMESTAMP_FORMAT = "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS[.ffffff]] with an optional Z or ±HH:MM"

_PATTERN = re.compile(
    r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})?)?", re.ASCII
)


def _text_only(value: Any) -> Any:
    if isinstance(value, datetime):  # from Python callers (tests, the command line)
        return value
    if not isinstance(value, str) or not _PATTERN.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        raise PydanticCustomError(
            "timestamp", "must be a timestamp, {format} (got {shown})",
            {"format": TIMESTAMP_FORMAT, "shown": shown},
        )
    return value


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # not a ValueError: pydantic would let it out as a 500
        raise PydanticCustomError(
            "timestamp_range", "is out of range: {shown} is not within years 1-9999 in UTC",
            {"shown": value.isoformat()},
        ) from None


Timestamp = Annotated[datetime, BeforeValidator(_text_only), AfterValidator(_utc)]
"""A strict timestamp (see the module's docstring), as an aware UTC datetime."""
