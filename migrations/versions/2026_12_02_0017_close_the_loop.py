"""Close the loop (issue 48): the logged inputs of served rows, a version's lineage, an alias
move's reason and evidence, and the retraining policies.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)
LOG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "prediction_inputs",
        sa.Column("id", LOG_ID, nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("registered_model", sa.String(length=100), nullable=False),
        sa.Column("prediction_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("row", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prediction_inputs")),
    )
    op.create_index("ix_prediction_inputs_registered_model_created_at", "prediction_inputs",
                    ["registered_model", "created_at"])
    op.create_index("ix_prediction_inputs_created_at", "prediction_inputs", ["created_at"])
    # nullable columns: a plain ADD COLUMN on both databases (no table copy on SQLite)
    op.add_column("model_versions", sa.Column("lineage", sa.JSON(), nullable=True))
    op.add_column("alias_moves", sa.Column("reason", sa.Text(), nullable=True))
    op.add_column("alias_moves", sa.Column("evidence", sa.JSON(), nullable=True))
    op.create_table(
        "retrain_policies",
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("evaluated_until", UTC_TIMESTAMP, nullable=True),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("updated_at", UTC_TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["registered_model_id"], ["registered_models.id"],
            name=op.f("fk_retrain_policies_registered_model_id_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("registered_model_id", name=op.f("pk_retrain_policies")),
    )


def downgrade() -> None:
    op.drop_table("retrain_policies")
    with op.batch_alter_table("alias_moves") as batch:
        batch.drop_column("evidence")
        batch.drop_column("reason")
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("lineage")
    op.drop_index("ix_prediction_inputs_created_at", table_name="prediction_inputs")
    op.drop_index("ix_prediction_inputs_registered_model_created_at",
                  table_name="prediction_inputs")
    op.drop_table("prediction_inputs")
