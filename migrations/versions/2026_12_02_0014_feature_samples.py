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

UTC_TIMESTAMP = sa.DateTime(timezone=True)


_COLUMNS = "id, model_id, minute, n_rows, n_features, bins, counts"


def _create(with_sample: bool) -> None:
    extra = ([sa.Column("sample", sa.LargeBinary(), nullable=True),
              sa.Column("sample_at", sa.LargeBinary(), nullable=True)] if with_sample else [])
    op.create_table(
        "feature_counts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("minute", UTC_TIMESTAMP, nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("n_features", sa.Integer(), nullable=False),
        sa.Column("bins", sa.Integer(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        *extra,
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feature_counts")),
    )


def _rebuild(with_sample: bool) -> None:
    # SQLite: the table rebuilt under its own name (its stored CREATE statement is then the one
    # create_all emits), the rows copied with their ids, the indexes made again.
    op.drop_index("ix_feature_counts_minute", table_name="feature_counts")
    op.drop_index("ix_feature_counts_model_id_minute", table_name="feature_counts")
    op.rename_table("feature_counts", "_feature_counts_old")
    _create(with_sample)
    op.execute(f"INSERT INTO feature_counts ({_COLUMNS}) "
               f"SELECT {_COLUMNS} FROM _feature_counts_old")
    op.drop_table("_feature_counts_old")
    op.create_index("ix_feature_counts_model_id_minute", "feature_counts", ["model_id", "minute"])
    op.create_index("ix_feature_counts_minute", "feature_counts", ["minute"])


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(with_sample=True)
        return
    op.add_column("feature_counts", sa.Column("sample", sa.LargeBinary(), nullable=True))
    op.add_column("feature_counts", sa.Column("sample_at", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(with_sample=False)
        return
    op.drop_column("feature_counts", "sample_at")
    op.drop_column("feature_counts", "sample")
