"""The monitoring tables: the prediction log, per-minute feature counts and shadow scoring."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow

LogId = BigInteger().with_variant(Integer(), "sqlite")


class PredictionLog(Base):
    """One scored row, written off the request path by ``app.monitoring.log``; ``predicted``
    and ``true_class`` are indices into the model's ``classes`` (``true_class`` set by
    POST /feedback). No foreign key: a model's log outlives it until the retention ends it."""

    __tablename__ = "prediction_log"
    __table_args__ = (
        Index("ix_prediction_log_model_id_created_at", "model_id", "created_at"),
        Index("ix_prediction_log_model_id_prediction_id", "model_id", "prediction_id"),
        Index("ix_prediction_log_created_at", "created_at"),
        # an alias's rows by version in a window (app.monitoring.arms)
        Index("ix_prediction_log_registered_model_alias_created_at", "registered_model",
              "alias", "created_at"),
    )

    id: Mapped[int] = mapped_column(LogId, primary_key=True)
    model_id: Mapped[int] = mapped_column(Integer)
    registered_model: Mapped[str | None] = mapped_column(String(100))
    version: Mapped[int | None] = mapped_column(Integer)
    alias: Mapped[str | None] = mapped_column(String(100))
    prediction_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decision: Mapped[float] = mapped_column(Float)
    decisions: Mapped[list[float] | None] = mapped_column(JSON)  # multi-class: one per class
    predicted: Mapped[int] = mapped_column(Integer)
    clipped: Mapped[bool] = mapped_column(Boolean)
    true_class: Mapped[int | None] = mapped_column(Integer)
    feedback_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class PredictionInput(Base):
    """The encoded input row (before scaling; little-endian float64, the model's
    ``n_features`` values) of one logged prediction made through a registered model, written
    off the request path by ``app.monitoring.inputs``: the retraining jobs' feedback rows
    (app.loop) are these rows with the true class the log's row of the same id was given."""

    __tablename__ = "prediction_inputs"
    __table_args__ = (
        Index("ix_prediction_inputs_registered_model_created_at", "registered_model",
              "created_at"),
        Index("ix_prediction_inputs_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(LogId, primary_key=True)
    model_id: Mapped[int] = mapped_column(Integer)
    registered_model: Mapped[str] = mapped_column(String(100))
    prediction_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    row: Mapped[bytes] = mapped_column(LargeBinary)


class FeatureCounts(Base):
    """Per-feature counts of a model's logged rows over one minute (``app.monitoring.
    feature_drift``): ``counts`` is an (n_features, bins) array of little-endian uint32, each
    row the counts of that feature's scaled value in ``bins`` equal-width bins of [0, 1]. Several
    rows may share a minute (one per API process and write); the report sums them."""

    __tablename__ = "feature_counts"
    __table_args__ = (
        Index("ix_feature_counts_model_id_minute", "model_id", "minute"),
        Index("ix_feature_counts_minute", "minute"),
    )

    id: Mapped[int] = mapped_column(LogId, primary_key=True)
    model_id: Mapped[int] = mapped_column(Integer)
    minute: Mapped[datetime] = mapped_column(UTCDateTime)
    n_rows: Mapped[int] = mapped_column(Integer)
    n_features: Mapped[int] = mapped_column(Integer)
    bins: Mapped[int] = mapped_column(Integer)
    counts: Mapped[bytes] = mapped_column(LargeBinary)
    # A uniform sample of the minute's rows (app.monitoring.samples): (m, n_features) scaled
    # values as little-endian uint16 (value * 65535), and each row's time (float64 seconds).
    sample: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    sample_at: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


# --- shadow scoring (app.monitoring.shadow) -----------------------------------------------------


class ShadowRun(Base):
    """A registered model's shadow: the rows served through its default or ``production``
    reference are also scored by the version its ``alias`` names (the challenger), from
    ``started_at`` until ``stopped_at`` (null while it runs; at most one running per model)."""

    __tablename__ = "shadow_runs"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    registered_model_id: Mapped[int] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), index=True
    )
    alias: Mapped[str] = mapped_column(String(100))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class ShadowPrediction(Base):
    """One row scored by a shadow's challenger (``model_id``) next to the served model's
    (``served_model_id``) answer to it; ``predicted``/``served_predicted`` are indices into
    the (shared) classes. Written off the request path by ``app.monitoring.shadow``."""

    __tablename__ = "shadow_predictions"
    __table_args__ = (Index("ix_shadow_predictions_run_id_id", "run_id", "id"),)

    id: Mapped[int] = mapped_column(LogId, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("shadow_runs.id", ondelete="CASCADE"))
    model_id: Mapped[int] = mapped_column(Integer)
    served_model_id: Mapped[int] = mapped_column(Integer)
    prediction_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decision: Mapped[float] = mapped_column(Float)
    predicted: Mapped[int] = mapped_column(Integer)
    clipped: Mapped[bool] = mapped_column(Boolean)
    served_decision: Mapped[float] = mapped_column(Float)
    served_predicted: Mapped[int] = mapped_column(Integer)
    served_clipped: Mapped[bool] = mapped_column(Boolean)
