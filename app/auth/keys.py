"""API key secrets: generation, hashing, constant-time comparison, and the scopes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

KEY_PREFIX = "msv_"
# Shown in listings to tell keys apart: "msv_" and the first 8 random characters.
DISPLAY_CHARS = 12
# Longer tokens are refused before hashing (a key is 47 characters).
MAX_TOKEN_CHARS = 512


class Scope(StrEnum):
    """``read`` < ``write`` < ``admin``; a key may do what its scope and the lower ones may."""

    read = "read"
    write = "write"
    admin = "admin"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def covers(self, needed: Scope) -> bool:
        return self.rank >= needed.rank


_RANK = {Scope.read: 0, Scope.write: 1, Scope.admin: 2}


@dataclass(frozen=True)
class Principal:
    """Who a request's key belongs to (``key_id`` None: the MSVMAV_ADMIN_KEY)."""

    key_id: int | None
    name: str
    scope: Scope
    # When the key stops working (UTC; None: never). A remembered key (AuthGate's recheck
    # window) is refused from this instant too, not a window later.
    expires_at: datetime | None = None


def new_key() -> str:
    """A new secret: ``msv_`` and 32 random bytes, urlsafe base64 (43 characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """SHA-256 hex digest of the key: what is stored and compared. The keys are 256-bit random
    strings, so a fast unsalted hash is enough (nothing to brute-force, unlike passwords)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def display_prefix(key: str) -> str:
    return key[:DISPLAY_CHARS]


def same_hash(a: str, b: str) -> bool:
    """Constant-time equality of two hex digests."""
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))
