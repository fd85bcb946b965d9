"""A bounded sample of each model's logged rows' scaled features, kept beside the per-minute
feature counts (app.monitoring.samples): the rows the report's domain classifier compares
with the model's reference (issue 47).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("feature_counts") as batch:
        batch.add_column(sa.Column("sample", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("sample_at", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("feature_counts") as batch:
        batch.drop_column("sample_at")
        batch.drop_column("sample")
