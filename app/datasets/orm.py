"""The datasets' tables: a dataset's metadata row and its arrays (npy blobs in chunks, see
``app.core.storage``), so listing datasets never reads megabytes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

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


class DatasetArray(Base):
    __tablename__ = "dataset_arrays"

    dataset_id: Mapped[int] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    # npy bytes cut into chunks of at most MSVMAV_ARRAY_CHUNK_BYTES (app.core.storage)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True, default=0)
    data: Mapped[bytes] = mapped_column(LargeBinary)
