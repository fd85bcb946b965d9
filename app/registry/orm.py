"""The model registry's tables: registered models, their versions, aliases and the aliases'
history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

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
    # the alias's decision rules before and after the move (AliasMoveRule), when it had any
    rules: Mapped[AliasMoveRule | None] = relationship(lazy="selectin", viewonly=True)
    # the alias's canary before and after the move (AliasMoveCanary), when it had one
    canaries: Mapped[AliasMoveCanary | None] = relationship(lazy="selectin", viewonly=True)
    # why it moved and on what evidence (AliasMoveReason), when it was said
    why: Mapped[AliasMoveReason | None] = relationship(lazy="selectin", viewonly=True)

    @property
    def reason(self) -> str | None:
        return self.why.reason if self.why is not None else None

    @property
    def evidence(self) -> dict[str, Any] | None:
        return self.why.evidence if self.why is not None else None

    @property
    def from_rule(self) -> str | None:
        """The alias's own decision rule before the move (JSON text; None: its version's)."""
        return self.rules.from_rule if self.rules is not None else None

    @property
    def to_rule(self) -> str | None:
        return self.rules.to_rule if self.rules is not None else None

    @property
    def from_canary(self) -> dict[str, float | int] | None:
        """The alias's canary before the move ({version, percent}; None: it had none)."""
        c = self.canaries
        if c is None or c.from_version is None:
            return None
        return {"version": c.from_version, "percent": c.from_percent}

    @property
    def to_canary(self) -> dict[str, float | int] | None:
        c = self.canaries
        if c is None or c.to_version is None:
            return None
        return {"version": c.to_version, "percent": c.to_percent}


class AliasRule(Base):
    """An alias's own decision rule (solver.decision, JSON text): ``credit@production`` means
    a version and this rule; no row: the version's own rule. Goes with the alias."""

    __tablename__ = "alias_rules"
    __table_args__ = (
        ForeignKeyConstraint(
            ["registered_model_id", "alias"],
            ["model_aliases.registered_model_id", "model_aliases.alias"],
            ondelete="CASCADE",
        ),
    )

    registered_model_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alias: Mapped[str] = mapped_column(String(100), primary_key=True)
    rule: Mapped[str] = mapped_column(Text)


class AliasMoveRule(Base):
    """The alias's own decision rules before and after one move (null: none), for the moves
    where it had one: the history shows them and a rollback restores ``from_rule``."""

    __tablename__ = "alias_move_rules"

    move_id: Mapped[int] = mapped_column(
        ForeignKey("alias_moves.id", ondelete="CASCADE"), primary_key=True
    )
    from_rule: Mapped[str | None] = mapped_column(Text)
    to_rule: Mapped[str | None] = mapped_column(Text)


class AliasMoveReason(Base):
    """Why one move was made and on what evidence: an automatic move of a retraining policy
    (app.loop) says both (its record of the challenger against production)."""

    __tablename__ = "alias_move_reasons"

    move_id: Mapped[int] = mapped_column(
        ForeignKey("alias_moves.id", ondelete="CASCADE"), primary_key=True
    )
    reason: Mapped[str | None] = mapped_column(Text)
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class VersionLineage(Base):
    """A retrained version's lineage (app.loop): its parent, the rows added, the window, the
    warm start's saving. Goes with its version."""

    __tablename__ = "version_lineage"
    __table_args__ = (
        ForeignKeyConstraint(
            ["registered_model_id", "version"],
            ["model_versions.registered_model_id", "model_versions.version"],
            ondelete="CASCADE",
        ),
    )

    registered_model_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    lineage: Mapped[dict[str, Any]] = mapped_column(JSON)


class AliasCanary(Base):
    """An alias's canary (issue 48): version ``version`` of the same registered model answers
    ``percent`` (0 < percent < 100) of the alias's requests at every door, the alias's own
    version the rest (app.registry.references.route: sticky by a request key). ``rule``: the
    alias's own decision rule carried to the canary's version (null: its version's). Goes with
    the alias; its version cannot be deleted while it is a canary (composite foreign key)."""

    __tablename__ = "alias_canaries"
    __table_args__ = (
        ForeignKeyConstraint(
            ["registered_model_id", "alias"],
            ["model_aliases.registered_model_id", "model_aliases.alias"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(
            ["registered_model_id", "version"],
            ["model_versions.registered_model_id", "model_versions.version"],
        ),
    )

    registered_model_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alias: Mapped[str] = mapped_column(String(100), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    percent: Mapped[float] = mapped_column(Float)
    rule: Mapped[str | None] = mapped_column(Text)


class AliasMoveCanary(Base):
    """The alias's canary before and after one move (null version: none), for the moves where
    it had one: the history shows a canary's start, change and end, and a rollback restores
    ``from``."""

    __tablename__ = "alias_move_canaries"

    move_id: Mapped[int] = mapped_column(
        ForeignKey("alias_moves.id", ondelete="CASCADE"), primary_key=True
    )
    from_version: Mapped[int | None] = mapped_column(Integer)
    from_percent: Mapped[float | None] = mapped_column(Float)
    to_version: Mapped[int | None] = mapped_column(Integer)
    to_percent: Mapped[float | None] = mapped_column(Float)
