"""The stored models' tables: a model's metadata row and its arrays (npy blobs in chunks, see
``app.core.storage``), so listing models never reads megabytes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow


class Model(Base):
    __tablename__ = "models"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Plain references, no foreign keys: a model outlives its dataset and its job.
    job_id: Mapped[int | None] = mapped_column(Integer)
    dataset_id: Mapped[int | None] = mapped_column(Integer)
    algorithm: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    scaling: Mapped[str] = mapped_column(String(16))
    classes: Mapped[list[Any]] = mapped_column(JSON)
    n_features: Mapped[int] = mapped_column(Integer)
    feature_names: Mapped[list[str]] = mapped_column(JSON)
    # The dataset's encoding, copied so predictions work after the dataset is deleted.
    encoding: Mapped[dict[str, Any]] = mapped_column(JSON)
    estimator_meta: Mapped[dict[str, Any]] = mapped_column(JSON)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    n_train: Mapped[int] = mapped_column(Integer)
    n_test: Mapped[int] = mapped_column(Integer, default=0)
    holdout_accuracy: Mapped[float | None] = mapped_column(Float)
    fit_seconds: Mapped[float] = mapped_column(Float)
    n_iter: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def holdout_rule(self) -> str:
        """The name of the decision rule whose labels ``holdout_accuracy`` and the summary's
        ``evaluation`` measure: the model's own rule once one was set on it, else the default
        it was trained with (argmax of the probabilities; the decision's sign without them)."""
        evaluation = (self.summary or {}).get("evaluation") or {}
        named = (evaluation.get("decision_rule") or {}).get("name")
        if named:
            return str(named)
        return "sign" if (self.params or {}).get("calibration") in (None, "none") else "argmax"


class ModelArray(Base):
    __tablename__ = "model_arrays"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    # npy bytes cut into chunks of at most MSVMAV_ARRAY_CHUNK_BYTES (app.core.storage)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True, default=0)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class ModelRule(Base):
    """A stored model's decision rule (solver.decision, as JSON text; no row: the default,
    argmax of the probabilities or the decision's sign). Text, so the model's stamp, read by
    the raw driver with it (app.models.service.model_stamp), compares equal on both
    databases: a rule set since makes every cached copy stale."""

    __tablename__ = "model_rules"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    rule: Mapped[str] = mapped_column(Text)
