"""API keys may expire: ``api_keys.expires_at`` (null: never), set when the key is created.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)
_COLUMNS = "id, name, scope, prefix, key_hash, created_at, last_used_at, revoked_at"


def _create(with_expiry: bool) -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("last_used_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("revoked_at", UTC_TIMESTAMP, nullable=True),
        *([sa.Column("expires_at", UTC_TIMESTAMP, nullable=True)] if with_expiry else []),
        sa.CheckConstraint("scope IN ('read', 'write', 'admin')", name=op.f("ck_api_keys_scope")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
        sqlite_autoincrement=True,
    )


def _rebuild(with_expiry: bool) -> None:
    # SQLite: the table rebuilt under its own name (its stored CREATE statement is then the one
    # create_all emits, AUTOINCREMENT included), the rows copied with their ids.
    op.rename_table("api_keys", "_api_keys_old")
    _create(with_expiry)
    op.execute(f"INSERT INTO api_keys ({_COLUMNS}) SELECT {_COLUMNS} FROM _api_keys_old")
    op.drop_table("_api_keys_old")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(with_expiry=True)
    else:
        op.add_column("api_keys", sa.Column("expires_at", UTC_TIMESTAMP, nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(with_expiry=False)
    else:
        op.drop_column("api_keys", "expires_at")
