"""The signature of a webhook delivery, Stripe-style: the header
``Msvmav-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``.

The timestamp is inside the signed text, so a receiver that refuses a ``t`` older than its
tolerance (``TOLERANCE_SECONDS``, 5 minutes) refuses a replayed delivery; each attempt is
signed afresh. ``verify`` is the receiver's recipe (docs/monitoring.md), used by the tests."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

HEADER = "Msvmav-Signature"
TOLERANCE_SECONDS = 300.0


def new_secret() -> str:
    """A hook's secret: 32 random bytes, URL-safe text (``whsec_`` prefixed)."""
    return "whsec_" + secrets.token_urlsafe(32)


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The header's value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(secret: str, body: bytes, header: str, now: float | None = None,
           tolerance: float = TOLERANCE_SECONDS) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` and its ``t`` is within
    ``tolerance`` seconds of ``now`` (compared in constant time)."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))
