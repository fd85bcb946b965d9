"""The model registry: registered models, their versions, aliases and the aliases' history.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "registered_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("last_version", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("updated_at", UTC_TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_registered_models")),
        sa.UniqueConstraint("name", name=op.f("uq_registered_models_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "alias_moves",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("alias", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=True),
        sa.Column("to_version", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=255), nullable=True),
        sa.Column("moved_at", UTC_TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["registered_model_id"],
            ["registered_models.id"],
            name=op.f("fk_alias_moves_registered_model_id_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alias_moves")),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_alias_moves_registered_model_id_alias_id",
        "alias_moves",
        ["registered_model_id", "alias", "id"],
        unique=False,
    )
    op.create_index(
        "ix_alias_moves_registered_model_id_id",
        "alias_moves",
        ["registered_model_id", "id"],
        unique=False,
    )
    op.create_table(
        "model_versions",
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["registered_model_id"],
            ["registered_models.id"],
            name=op.f("fk_model_versions_registered_model_id_registered_models"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_model_versions_model_id_models")
        ),
        sa.PrimaryKeyConstraint("registered_model_id", "version", name=op.f("pk_model_versions")),
    )
    op.create_index(
        op.f("ix_model_versions_model_id"), "model_versions", ["model_id"], unique=False
    )
    op.create_table(
        "model_aliases",
        sa.Column("registered_model_id", sa.Integer(), nullable=False),
        sa.Column("alias", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", UTC_TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["registered_model_id", "version"],
            ["model_versions.registered_model_id", "model_versions.version"],
            name=op.f("fk_model_aliases_registered_model_id_model_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["registered_model_id"],
            ["registered_models.id"],
            name=op.f("fk_model_aliases_registered_model_id_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("registered_model_id", "alias", name=op.f("pk_model_aliases")),
    )


def downgrade() -> None:
    op.drop_table("model_aliases")
    op.drop_index(op.f("ix_model_versions_model_id"), table_name="model_versions")
    op.drop_table("model_versions")
    op.drop_index("ix_alias_moves_registered_model_id_id", table_name="alias_moves")
    op.drop_index("ix_alias_moves_registered_model_id_alias_id", table_name="alias_moves")
    op.drop_table("alias_moves")
    op.drop_table("registered_models")
