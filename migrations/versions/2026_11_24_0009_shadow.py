"""Shadow scoring (app.monitoring.shadow): a registered model's shadow runs and the rows their
challenger scored.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "shadow_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("alias", sa.String(length=100), nullable=False),
        sa.Column("started_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("stopped_at", UTC_TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["registered_model_id"],
            ["registered_models.id"],
            name=op.f("fk_shadow_runs_registered_model_id_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_shadow_runs")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_shadow_runs_registered_model_id", "shadow_runs", ["registered_model_id"])
    op.create_table(
        "shadow_predictions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("served_model_id", sa.Integer(), nullable=False),
        sa.Column("prediction_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("decision", sa.Float(), nullable=False),
        sa.Column("predicted", sa.Integer(), nullable=False),
        sa.Column("clipped", sa.Boolean(), nullable=False),
        sa.Column("served_decision", sa.Float(), nullable=False),
        sa.Column("served_predicted", sa.Integer(), nullable=False),
        sa.Column("served_clipped", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["shadow_runs.id"],
            name=op.f("fk_shadow_predictions_run_id_shadow_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_shadow_predictions")),
    )
    op.create_index("ix_shadow_predictions_run_id_id", "shadow_predictions", ["run_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_shadow_predictions_run_id_id", table_name="shadow_predictions")
    op.drop_table("shadow_predictions")
    op.drop_index("ix_shadow_runs_registered_model_id", table_name="shadow_runs")
    op.drop_table("shadow_runs")
