"""The one declarative ``Base`` every table derives from, the column types they share, and the
core's own table (``idempotency_keys``).

Each domain declares its tables in its own ``orm`` module (``app.datasets.orm``,
``app.jobs.orm`` ...); ``app.tables`` imports them all, so ``Base.metadata`` holds every table
for Alembic and the tests. The Alembic revisions in ``migrations/versions`` must produce exactly
that schema (``tests/app/test_migrations.py`` checks it with ``compare_metadata`` and, on SQLite,
by comparing the CREATE statements, which also covers CHECK constraints and AUTOINCREMENT).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Integer,
    MetaData,
    String,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on both backends (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        # SQLite compares datetimes as text: store them all naive in UTC so comparisons hold.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class IdempotencyKey(Base):
    """The first response to a POST sent with an ``Idempotency-Key`` header, written in the same
    transaction as the row that POST created (``app.core.idempotency``).

    ``scope`` (the primary key) is sha256 of the principal and the key, so a key is unique per
    principal; ``principal`` is NULL until requests carry one (API keys: the key's id/name)."""

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal: Mapped[str | None] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(255))
    fingerprint: Mapped[str] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(String(255))
    status_code: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    headers: Mapped[dict[str, str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
