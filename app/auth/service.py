"""The ``api_keys`` rows: create (the secret is returned once, only its hash stored), list,
revoke, and the lookup of a presented key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from app.auth.keys import (
    MAX_TOKEN_CHARS,
    Principal,
    Scope,
    display_prefix,
    hash_key,
    new_key,
    same_hash,
)
from app.auth.orm import ApiKey
from app.core.db import fetch_one
from app.core.ids import in_range
from app.core.orm import utcnow
from app.core.pagination import PageParams, paginate
from app.core.problems import not_found

# last_used_at is written at most this often per key and API process, so that reads do not
# all write.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# A presented key's row; "revoked_at IS NULL" is 1/0 on SQLite, true/false on PostgreSQL.
_LOOKUP_SQL = (
    f"SELECT id, name, scope, key_hash, revoked_at IS NULL, expires_at "
    f"FROM {ApiKey.__tablename__} WHERE key_hash = ?"
)


class KeyExpiredError(Exception):
    """The presented key is known and not revoked, but expired at ``expires_at``."""

    def __init__(self, expires_at: datetime) -> None:
        super().__init__(f"API key expired at {expires_at.isoformat()}")
        self.expires_at = expires_at


def _as_utc(value: datetime | str) -> datetime:
    """A timestamp column read by raw SQL: an aware datetime (PostgreSQL) or SQLite's naive
    UTC text."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
_ANY_KEY_SQL = f"SELECT id FROM {ApiKey.__tablename__} LIMIT 1"


def create(
    session: Session, name: str, scope: Scope, expires_at: datetime | None = None
) -> tuple[ApiKey, str]:
    """A new key row (refused from ``expires_at`` on, if given); returns it and the secret,
    which exists nowhere else afterwards."""
    secret = new_key()
    row = ApiKey(
        name=name,
        scope=scope.value,
        prefix=display_prefix(secret),
        key_hash=hash_key(secret),
        expires_at=expires_at,
    )
    session.add(row)
    session.commit()
    return row, secret


def list_page(session: Session, page: PageParams) -> tuple[list[ApiKey], str | None]:
    return paginate(session, select(ApiKey), ApiKey.id, page)


def get_or_raise(session: Session, key_id: int) -> ApiKey:
    row = session.get(ApiKey, key_id) if in_range(key_id) else None
    if row is None:
        raise not_found("API key", key_id)
    return row


def revoke(session: Session, key_id: int) -> ApiKey:
    """Revoke now (idempotent: a revoked key keeps its first ``revoked_at``). The row stays."""
    row = get_or_raise(session, key_id)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.commit()
    return row


def any_key_exists(session: Session) -> bool:
    """True once a key was ever created, revoked or not."""
    return session.scalar(select(ApiKey.id).limit(1)) is not None


def any_key_exists_now(reader: Engine) -> bool:
    """``any_key_exists`` on a connection of ``fetch_one``'s pool ``reader`` (a runtime's
    ``reader``; the per-request check)."""
    return fetch_one(reader, _ANY_KEY_SQL, ()) is not None


def usable_key_exists(session: Session) -> bool:
    """True when some key is neither revoked nor expired."""
    unexpired = ApiKey.expires_at.is_(None) | (ApiKey.expires_at > utcnow())
    stmt = select(ApiKey.id).where(ApiKey.revoked_at.is_(None), unexpired).limit(1)
    return session.scalar(stmt) is not None


def lookup(reader: Engine, token: str, admin_hash: str | None) -> Principal | None:
    """The owner of ``token``, or None for an unknown, revoked or malformed one;
    KeyExpiredError for a known, unrevoked key past its ``expires_at``. One indexed read on a
    pooled connection of ``reader`` (``fetch_one``: no ORM session, about 15 µs on SQLite
    instead of 240), so that it can run on every request; writes nothing (see ``mark_used``)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    digest = hash_key(token)
    if admin_hash is not None and same_hash(digest, admin_hash):
        return Principal(key_id=None, name="MSVMAV_ADMIN_KEY", scope=Scope.admin)
    row = fetch_one(reader, _LOOKUP_SQL, (digest,))
    if row is None:
        return None
    key_id, name, scope, key_hash, usable, expires_at = row
    if not same_hash(key_hash, digest) or not usable:
        return None
    if expires_at is not None and _as_utc(expires_at) <= utcnow():
        raise KeyExpiredError(_as_utc(expires_at))
    expiry = None if expires_at is None else _as_utc(expires_at)
    return Principal(key_id=key_id, name=name, scope=Scope(scope), expires_at=expiry)


def mark_used(session: Session, key_id: int) -> None:
    """Commit the key's ``last_used_at`` (now), in a write transaction of its own."""
    session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=utcnow()))
    session.commit()
