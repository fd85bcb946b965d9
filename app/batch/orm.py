"""The batch scoring table: the pieces of a batch job's files."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base


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
