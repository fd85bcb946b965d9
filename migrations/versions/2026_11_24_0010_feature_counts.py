"""Per-feature counts of the logged rows, per model and minute (app.monitoring.feature_drift).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "feature_counts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("minute", UTC_TIMESTAMP, nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("n_features", sa.Integer(), nullable=False),
        sa.Column("bins", sa.Integer(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feature_counts")),
    )
    op.create_index("ix_feature_counts_model_id_minute", "feature_counts", ["model_id", "minute"])
    op.create_index("ix_feature_counts_minute", "feature_counts", ["minute"])


def downgrade() -> None:
    op.drop_index("ix_feature_counts_minute", table_name="feature_counts")
    op.drop_index("ix_feature_counts_model_id_minute", table_name="feature_counts")
    op.drop_table("feature_counts")
