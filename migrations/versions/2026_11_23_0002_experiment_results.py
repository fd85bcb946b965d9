"""Experiment results per data set; model algorithm names become the API's keys.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiment_results",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_experiment_results_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name=op.f("pk_experiment_results")),
    )
    # Models trained before other algorithms existed were labelled with the display name;
    # the API now uses the algorithm keys of /train ("msvmav", "svm", ...).
    op.execute("UPDATE models SET algorithm = 'msvmav' WHERE algorithm = 'MSVMAv'")


def downgrade() -> None:
    op.execute("UPDATE models SET algorithm = 'MSVMAv' WHERE algorithm = 'msvmav'")
    op.drop_table("experiment_results")
