"""The ``api_keys`` rows: create (the secret is returned once, only its hash stored), list,
revoke, and the lookup of a presented key."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update
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
from app.orm import ApiKey, utcnow
from app.pagination import PageParams, paginate
from app.problems import not_found

# last_used_at is written at most this often per key, so that reads do not all write.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# Ids beyond a 32-bit integer column cannot exist (PostgreSQL would refuse the comparison).
MAX_ID = 2**31 - 1


def create(session: Session, name: str, scope: Scope) -> tuple[ApiKey, str]:
    """A new key row; returns it and the secret, which exists nowhere else afterwards."""
    secret = new_key()
    row = ApiKey(
        name=name, scope=scope.value, prefix=display_prefix(secret), key_hash=hash_key(secret)
    )
    session.add(row)
    session.commit()
    return row, secret


def list_page(session: Session, page: PageParams) -> tuple[list[ApiKey], str | None]:
    return paginate(session, select(ApiKey), ApiKey.id, page)


def get_or_raise(session: Session, key_id: int) -> ApiKey:
    row = session.get(ApiKey, key_id) if 0 < key_id <= MAX_ID else None
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


def usable_key_exists(session: Session) -> bool:
    """True when some key is not revoked."""
    stmt = select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)
    return session.scalar(stmt) is not None


def authenticate(session: Session, token: str, admin_hash: str | None) -> Principal | None:
    """The owner of ``token``, or None for an unknown, revoked or malformed one. Commits the
    key's ``last_used_at`` (at most once per LAST_USED_RESOLUTION)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    digest = hash_key(token)
    if admin_hash is not None and same_hash(digest, admin_hash):
        return Principal(key_id=None, name="MSVMAV_ADMIN_KEY", scope=Scope.admin)
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == digest))
    if row is None or not same_hash(row.key_hash, digest) or row.revoked_at is not None:
        return None
    principal = Principal(key_id=row.id, name=row.name, scope=Scope(row.scope))
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        # The lookup may run in a read-only (deferred SQLite) transaction, which must not
        # upgrade to a write: end it, and stamp the key in a write transaction of its own.
        session.rollback()
        stamp = update(ApiKey).where(ApiKey.id == principal.key_id).values(last_used_at=now)
        session.execute(stamp)
        session.commit()
    return principal
