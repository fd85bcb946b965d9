"""API keys with scopes (only the SHA-256 of each secret is stored).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
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
        sa.CheckConstraint("scope IN ('read', 'write', 'admin')", name=op.f("ck_api_keys_scope")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("api_keys")
