"""ORM tables. The Alembic revisions in ``migrations/versions`` must produce exactly this schema
(``tests/app/test_migrations.py`` checks it with ``compare_metadata`` and, on SQLite, by
comparing the CREATE statements, which also covers CHECK constraints and AUTOINCREMENT).

Arrays never live in the metadata rows: they go to ``dataset_arrays`` / ``model_arrays`` as npy
blobs (see ``app.core.storage``), so listing datasets or models never reads megabytes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
ACTIVE_JOB_STATUSES = ("queued", "running")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on both backends (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        # SQLite compares datetimes as text: store them all naive in UTC so comparisons hold.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Dataset(Base):
    __tablename__ = "datasets"
    # AUTOINCREMENT: ids are never reused after a delete (cursors and caches rely on it).
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    filename: Mapped[str] = mapped_column(String(255), default="")
    format: Mapped[str] = mapped_column(String(32))
    n_rows: Mapped[int] = mapped_column(Integer)
    n_features: Mapped[int] = mapped_column(Integer)
    n_rows_dropped: Mapped[int] = mapped_column(Integer, default=0)
    sparse: Mapped[bool] = mapped_column(Boolean, default=False)
    feature_names: Mapped[list[str]] = mapped_column(JSON)
    classes: Mapped[list[Any]] = mapped_column(JSON)
    class_counts: Mapped[list[int]] = mapped_column(JSON)
    encoding: Mapped[dict[str, Any]] = mapped_column(JSON)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # A dataset by reference (POST /datasets/references) has its row in dataset_references;
    # None for an uploaded one (its rows are in dataset_arrays).
    reference: Mapped[DatasetReference | None] = relationship(
        lazy="selectin", cascade="all, delete-orphan", passive_deletes=True
    )


class DatasetReference(Base):
    """Where a dataset by reference lies: its rows stay in the Parquet files at ``uri`` (read
    where they lie by every job); ``files`` holds each file's path, rows and bytes, and
    ``data_min``/``data_max`` the encoded features' ranges from the first pass."""

    __tablename__ = "dataset_references"

    dataset_id: Mapped[int] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    uri: Mapped[str] = mapped_column(Text)
    files: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    data_min: Mapped[list[float]] = mapped_column(JSON)
    data_max: Mapped[list[float]] = mapped_column(JSON)


class DatasetArray(Base):
    __tablename__ = "dataset_arrays"

    dataset_id: Mapped[int] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    # npy bytes cut into chunks of at most MSVMAV_ARRAY_CHUNK_BYTES (app.core.storage)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True, default=0)
    data: Mapped[bytes] = mapped_column(LargeBinary)


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


class ModelArray(Base):
    __tablename__ = "model_arrays"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    # npy bytes cut into chunks of at most MSVMAV_ARRAY_CHUNK_BYTES (app.core.storage)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True, default=0)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Job(Base):
    """A unit of background work. ``kind`` selects the runner in ``app.jobs.worker``; ``params`` and
    ``result`` are free-form JSON so other kinds (grid search, experiments) fit the same table."""

    __tablename__ = "jobs"
    __table_args__ = (
        # Migration 0001 spells this out; a new status needs a migration.
        CheckConstraint(
            "status IN (" + ", ".join(f"'{s}'" for s in JOB_STATUSES) + ")", name="status"
        ),
        Index("ix_jobs_status_id", "status", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    model_id: Mapped[int | None] = mapped_column(ForeignKey("models.id", ondelete="SET NULL"))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    worker_id: Mapped[str | None] = mapped_column(String(255))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class ExperimentResult(Base):
    """One data set's outcome of an experiment job (``solver.experiments.ExperimentResult``
    as ``to_dict()``), in the experiment's dataset order. Kept out of ``jobs.result`` so that
    listing jobs never reads the per-split tables and margin curves."""

    __tablename__ = "experiment_results"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    # A plain reference: the result outlives its dataset.
    dataset_id: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)  # a data set's name, plus " (#id)" when repeated
    result: Mapped[dict[str, Any]] = mapped_column(JSON)


#: What became of one claim of a job (``JobAttempt.outcome``, and the API's
#: ``JobAttemptOut.outcome``); no CHECK constraint enforces it in the database.
JobAttemptOutcome = Literal["running", "succeeded", "failed", "cancelled", "requeued", "lost"]


class JobAttempt(Base):
    """One claim of a job by a worker: ``number`` counts the job's claims from 1 (it equals
    ``jobs.attempts`` when made). ``outcome``: running, then succeeded / failed / cancelled,
    ``requeued`` (its worker shut down and put the job back) or ``lost`` (its worker stopped
    heartbeating: lease expired)."""

    __tablename__ = "job_attempts"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker_id: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    outcome: Mapped[str] = mapped_column(String(16), default="running")


class IdempotencyKey(Base):
    """The first response to a POST sent with an ``Idempotency-Key`` header, written in the same
    transaction as the row that POST created (``app.core.idempotency``).

    ``scope`` (the primary key) is sha256 of the principal and the key, so a key is unique per
    principal; ``principal`` is NULL until requests carry one (API keys: the key's id/name)."""

    __tablename__ = "idempotency_keys"

    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal: Mapped[str | None] = mapped_column(String(255))
    key: Mapped[str] = mapped_column(String(255))
    fingerprint: Mapped[str] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(String(255))
    status_code: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    headers: Mapped[dict[str, str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


API_KEY_SCOPES = ("read", "write", "admin")


class ApiKey(Base):
    """An API key (``app.auth``): only the SHA-256 of the secret is stored, with its first
    characters for display. Revoking sets ``revoked_at``; rows are never deleted, so a service
    that once had a key keeps requiring one (``MSVMAV_AUTH=auto``)."""

    __tablename__ = "api_keys"
    __table_args__ = (
        # Migration 0003 spells this out; a new scope needs a migration.
        CheckConstraint(
            "scope IN (" + ", ".join(f"'{s}'" for s in API_KEY_SCOPES) + ")", name="scope"
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    scope: Mapped[str] = mapped_column(String(16))
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # From then on the key is refused (401 naming the time); null: never (migration 0011).
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


# --- the model registry (app.registry) ---------------------------------------------------------


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


# --- the prediction log (app.monitoring) -------------------------------------------------------

# SQLite's INTEGER PRIMARY KEY is the rowid (64-bit); PostgreSQL's BIGINT: room for billions.
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


# --- batch scoring (app.batch) ------------------------------------------------------------------


class BatchPart(Base):
    """A piece of a batch scoring job's files: ``input`` (the uploaded file, in pieces of at most
    ``app.batch.store.PIECE_BYTES`` numbered 0, 1, ...), ``output`` (the scored rows of input
    chunk ``chunk``: CSV lines without header, or a Parquet file) and ``errors`` (that chunk's
    bad rows as CSV lines). A chunk's output and errors are written in one transaction while the
    worker holds the job's lease, so the result holds every chunk exactly once."""

    __tablename__ = "batch_parts"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True)
    n_rows: Mapped[int] = mapped_column(Integer, default=0)
    data: Mapped[bytes] = mapped_column(LargeBinary)
