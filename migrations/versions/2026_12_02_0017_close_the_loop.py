"""Close the loop (issue 48): the logged inputs of served rows (``prediction_inputs``), a
version's lineage (``version_lineage``), an alias move's reason and evidence
(``alias_move_reasons``), and the retraining policies (``retrain_policies``).

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
    # new tables rather than columns, so that no table is rebuilt on SQLite (as 0015)
    op.create_table(
        "version_lineage",
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("lineage", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["registered_model_id", "version"],
            ["model_versions.registered_model_id", "model_versions.version"],
            name=op.f("fk_version_lineage_registered_model_id_model_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("registered_model_id", "version",
                                name=op.f("pk_version_lineage")),
    )
    op.create_table(
        "alias_move_reasons",
        sa.Column("move_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["move_id"], ["alias_moves.id"],
                                name=op.f("fk_alias_move_reasons_move_id_alias_moves"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("move_id", name=op.f("pk_alias_move_reasons")),
    )
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
    op.drop_table("alias_move_reasons")
    op.drop_table("version_lineage")
    op.drop_index("ix_prediction_inputs_created_at", table_name="prediction_inputs")
    op.drop_index("ix_prediction_inputs_registered_model_created_at",
                  table_name="prediction_inputs")
    op.drop_table("prediction_inputs")
