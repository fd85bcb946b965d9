"""The datasets' tables: a dataset's metadata row and its arrays (npy blobs in chunks, see
``app.core.storage``), so listing datasets never reads megabytes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.orm import Base, UTCDateTime, utcnow


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
