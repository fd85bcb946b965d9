"""The API keys' table."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow

API_KEY_SCOPES = ("read", "write", "admin")


class ApiKey(Base):
    """An API key (``app.auth``): only the SHA-256 of the secret is stored, with its first
    characters for display. Revoking sets ``revoked_at``; rows are never deleted, so a service
    that once had a key keeps requiring one (``MSVMAV_AUTH=auto``)."""

    __tablename__ = "api_keys"
    __table_args__ = (
        # Migration 0003 spells this out; a new scope needs a migration.
        CheckConstraint(
            "scope IN (" + ", ".join(f"'{s}'" for s in API_KEY_SCOPES) + ")", name="scope"
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    scope: Mapped[str] = mapped_column(String(16))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # From then on the key is refused (401 naming the time); null: never (migration 0011).
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
