"""Alert rules, webhooks and their deliveries (issue 47).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "alert_rules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=220), nullable=True),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("comparison", sa.String(length=2), nullable=False),
        sa.Column("level", sa.Float(), nullable=False),
        sa.Column("window_seconds", sa.Integer(), nullable=False),
        sa.Column("cooldown_seconds", sa.Integer(), nullable=False),
        sa.Column("min_rows", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("evaluated_until", UTC_TIMESTAMP, nullable=True),
        sa.Column("last_fired_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("last_window", sa.JSON(), nullable=True),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_rules")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("webhook_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("rule_id", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("response_code", sa.Integer(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("next_attempt_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("claimed_until", UTC_TIMESTAMP, nullable=True),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("delivered_at", UTC_TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["webhook_id"], ["webhooks.id"],
            name=op.f("fk_webhook_deliveries_webhook_id_webhooks"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_webhook_deliveries_status_next_attempt_at", "webhook_deliveries",
                    ["status", "next_attempt_at"])
    op.create_index("ix_webhook_deliveries_webhook_id_id", "webhook_deliveries",
                    ["webhook_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_webhook_id_id", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_status_next_attempt_at", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
    op.drop_table("alert_rules")
