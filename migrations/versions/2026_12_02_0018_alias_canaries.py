"""Canary traffic (issue 48): an alias's canary (``alias_canaries``: a second version of the
registered model that answers ``percent`` of the alias's requests, with the alias's decision
rule carried to it) and a move's canary before and after (``alias_move_canaries``, so the
history shows a canary's start, change and end and a rollback restores it), and an index of
the prediction log by registered model, alias and time (each arm's rows:
app.monitoring.arms). New tables: no table is rebuilt on SQLite.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alias_canaries",
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("alias", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("percent", sa.Float(), nullable=False),
        sa.Column("rule", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["registered_model_id", "alias"],
            ["model_aliases.registered_model_id", "model_aliases.alias"],
            name=op.f("fk_alias_canaries_registered_model_id_model_aliases"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["registered_model_id", "version"],
            ["model_versions.registered_model_id", "model_versions.version"],
            name=op.f("fk_alias_canaries_registered_model_id_model_versions"),
        ),
        sa.PrimaryKeyConstraint("registered_model_id", "alias", name=op.f("pk_alias_canaries")),
    )
    op.create_table(
        "alias_move_canaries",
        sa.Column("move_id", sa.Integer(), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=True),
        sa.Column("from_percent", sa.Float(), nullable=True),
        sa.Column("to_version", sa.Integer(), nullable=True),
        sa.Column("to_percent", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["move_id"], ["alias_moves.id"],
                                name=op.f("fk_alias_move_canaries_move_id_alias_moves"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("move_id", name=op.f("pk_alias_move_canaries")),
    )
    # an alias's rows by version in a window (app.monitoring.arms)
    op.create_index("ix_prediction_log_registered_model_alias_created_at", "prediction_log",
                    ["registered_model", "alias", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_prediction_log_registered_model_alias_created_at",
                  table_name="prediction_log")
    op.drop_table("alias_move_canaries")
    op.drop_table("alias_canaries")
