"""The prediction log (app.monitoring): every scored row, with its feedback.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "prediction_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("registered_model", sa.String(length=100), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("alias", sa.String(length=100), nullable=True),
        sa.Column("prediction_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("decision", sa.Float(), nullable=False),
        sa.Column("decisions", sa.JSON(), nullable=True),
        sa.Column("predicted", sa.Integer(), nullable=False),
        sa.Column("clipped", sa.Boolean(), nullable=False),
        sa.Column("true_class", sa.Integer(), nullable=True),
        sa.Column("feedback_at", UTC_TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prediction_log")),
    )
    op.create_index(
        "ix_prediction_log_model_id_created_at", "prediction_log", ["model_id", "created_at"]
    )
    op.create_index(
        "ix_prediction_log_model_id_prediction_id",
        "prediction_log",
        ["model_id", "prediction_id"],
    )
    op.create_index("ix_prediction_log_created_at", "prediction_log", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_prediction_log_created_at", table_name="prediction_log")
    op.drop_index("ix_prediction_log_model_id_prediction_id", table_name="prediction_log")
    op.drop_index("ix_prediction_log_model_id_created_at", table_name="prediction_log")
    op.drop_table("prediction_log")
