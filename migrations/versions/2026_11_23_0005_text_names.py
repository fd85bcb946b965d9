"""Experiment row names become unbounded text.

A row name is the data set's name, with `` (#id)`` added where names repeat, so it can be
longer than the 255 characters a data set's name is limited to.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _retype_name(sa.Text(), sa.String(length=255))


def downgrade() -> None:
    _retype_name(sa.String(length=255), sa.Text())


def _retype_name(new: sa.types.TypeEngine, old: sa.types.TypeEngine) -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column(
            "experiment_results", "name", existing_type=old, type_=new, existing_nullable=False
        )
        return
    # SQLite cannot alter a column: rebuild the table (created under its own name, so that its
    # stored CREATE statement is the one create_all emits) and copy the rows.
    op.rename_table("experiment_results", "_experiment_results_old")
    op.create_table(
        "experiment_results",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=True),
        sa.Column("name", new, nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_experiment_results_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name=op.f("pk_experiment_results")),
    )
    op.execute(
        "INSERT INTO experiment_results (job_id, position, dataset_id, name, result) "
        "SELECT job_id, position, dataset_id, name, result FROM _experiment_results_old"
    )
    op.drop_table("_experiment_results_old")
