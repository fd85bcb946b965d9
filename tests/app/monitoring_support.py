"""Helpers of the monitoring tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any


def settled(r: Any) -> dict[str, Any]:
    """A /feedback or report answer without its ``log`` state, which must say the log was
    fully written (nothing pending in this process) and read just now."""
    assert r.status_code == 200, r.text
    body = r.json()
    state = body.pop("log")
    assert state["pending_rows"] == 0, state
    as_of = datetime.fromisoformat(state["as_of"].replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - as_of) < timedelta(minutes=1), state
    return body
