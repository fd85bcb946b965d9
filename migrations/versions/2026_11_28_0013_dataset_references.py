"""Datasets by reference: the Parquet location of a dataset whose rows are not stored, its
files and its features' ranges from the first pass (issue 32).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dataset_references",
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("data_min", sa.JSON(), nullable=False),
        sa.Column("data_max", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"],
            name=op.f("fk_dataset_references_dataset_id_datasets"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("dataset_id", name=op.f("pk_dataset_references")),
    )


def downgrade() -> None:
    op.drop_table("dataset_references")
