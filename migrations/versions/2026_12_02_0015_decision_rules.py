"""Decision rules (issue 44): a stored model's rule (``model_rules``), a registry alias's own
rule (``alias_rules``) and the alias's rules before and after a move (``alias_move_rules``, so
a rollback restores the rule with the version); JSON text. New tables, so that no table is
rebuilt on SQLite (dropping ``models`` there would cascade to its arrays).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_rules",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"],
                                name=op.f("fk_model_rules_model_id_models"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("model_id", name=op.f("pk_model_rules")),
    )
    op.create_table(
        "alias_rules",
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("alias", sa.String(length=100), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["registered_model_id", "alias"],
            ["model_aliases.registered_model_id", "model_aliases.alias"],
            name=op.f("fk_alias_rules_registered_model_id_model_aliases"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("registered_model_id", "alias", name=op.f("pk_alias_rules")),
    )
    op.create_table(
        "alias_move_rules",
        sa.Column("move_id", sa.Integer(), nullable=False),
        sa.Column("from_rule", sa.Text(), nullable=True),
        sa.Column("to_rule", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["move_id"], ["alias_moves.id"],
                                name=op.f("fk_alias_move_rules_move_id_alias_moves"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("move_id", name=op.f("pk_alias_move_rules")),
    )


def downgrade() -> None:
    op.drop_table("alias_move_rules")
    op.drop_table("alias_rules")
    op.drop_table("model_rules")
