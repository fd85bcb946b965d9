"""The model registry's tables: registered models, their versions, aliases and the aliases'
history."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, ForeignKeyConstraint, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow


class RegisteredModel(Base):
    """A name for a line of stored models: its versions 1, 2, 3 … and its aliases.

    ``last_version`` counts the versions ever made, so a deleted version's number is never
    given again (the next version is ``last_version + 1``, taken under the row's lock)."""

    __tablename__ = "registered_models"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[dict[str, str]] = mapped_column(JSON)
    last_version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelVersion(Base):
    """Version ``version`` of a registered model: one stored model. The stored model cannot be
    deleted while it is a version (foreign key without cascade; the API answers 409)."""

    __tablename__ = "model_versions"

    registered_model_id: Mapped[int] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelAlias(Base):
    """A movable name (``production``, ``staging`` …) for one version of a registered model.
    A version cannot be deleted while an alias points at it (composite foreign key)."""

    __tablename__ = "model_aliases"
    __table_args__ = (
        ForeignKeyConstraint(
            ["registered_model_id", "version"],
            ["model_versions.registered_model_id", "model_versions.version"],
        ),
    )

    registered_model_id: Mapped[int] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True
    )
    alias: Mapped[str] = mapped_column(String(100), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AliasMove(Base):
    """One change of an alias, append-only: ``from_version`` null when the alias was created,
    ``to_version`` null when it was removed; ``actor`` the API key's name (null when keys are
    off, or the command line's ``cli``). The newest move of an alias is what a rollback undoes."""

    __tablename__ = "alias_moves"
    __table_args__ = (
        # The model's history, newest first; an alias's newest move (rollback).
        Index("ix_alias_moves_registered_model_id_id", "registered_model_id", "id"),
        Index("ix_alias_moves_registered_model_id_alias_id", "registered_model_id", "alias", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    registered_model_id: Mapped[int] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE")
    )
    alias: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(16))  # set, delete, rollback
    from_version: Mapped[int | None] = mapped_column(Integer)
    to_version: Mapped[int | None] = mapped_column(Integer)
    actor: Mapped[str | None] = mapped_column(String(255))
    moved_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
