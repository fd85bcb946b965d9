"""A batch job's files in the database (``batch_parts``): the uploaded input in pieces, read
back through a seekable file object one piece at a time; each chunk's output and errors,
written together while the worker holds the job's lease; and the result, streamed piece by
piece. Nothing here holds more than one piece or one chunk."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta
from typing import IO, Any

from sqlalchemy import Engine, and_, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from app.batch.orm import BatchPart
from app.core.orm import utcnow
from app.core.storage import fast_toast_compression
from app.jobs.orm import ACTIVE_JOB_STATUSES, Job
from app.jobs.runtime import JobCancelledError, JobLostError, owned

PIECE_BYTES = 8 * 1024 * 1024
INPUT, OUTPUT, ERRORS = "input", "output", "errors"
BATCH_KIND = "batch_predict"


def write_input(session: Session, job_id: int, file: IO[bytes]) -> int:
    """Copy ``file`` (from its start) into the job's input pieces; returns its size."""
    fast_toast_compression(session)
    file.seek(0)
    size, k = 0, 0
    while piece := file.read(PIECE_BYTES):
        session.execute(insert(BatchPart).values(job_id=job_id, kind=INPUT, chunk=k,
                                                 n_rows=0, data=piece))
        size += len(piece)
        k += 1
    return size


class InputReader(io.RawIOBase):
    """The stored input as a seekable binary file: each read fetches the piece it falls in
    (one primary-key read), keeping one piece in memory."""

    def __init__(self, engine: Engine, job_id: int, size: int) -> None:
        self._engine, self._job_id, self._size = engine, job_id, size
        self._pos = 0
        self._piece: tuple[int, bytes] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(base + offset, 0)
        return self._pos

    def _fetch(self, k: int) -> bytes:
        if self._piece is None or self._piece[0] != k:
            with self._engine.connect() as conn:
                data = conn.scalar(select(BatchPart.data).where(
                    BatchPart.job_id == self._job_id, BatchPart.kind == INPUT,
                    BatchPart.chunk == k))
            if data is None:
                raise ValueError("the job's input file is no longer stored")
            self._piece = (k, bytes(data))
        return self._piece[1]

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._size:
            return 0
        k, start = divmod(self._pos, PIECE_BYTES)
        piece = self._fetch(k)
        n = min(len(buffer), len(piece) - start)
        buffer[:n] = piece[start:start + n]
        self._pos += n
        return n


def done_chunks(engine: Engine, job_id: int) -> set[int]:
    """The chunks whose output an earlier attempt of the job already wrote."""
    with engine.connect() as conn:
        return set(conn.scalars(select(BatchPart.chunk).where(
            BatchPart.job_id == job_id, BatchPart.kind == OUTPUT)))


def save_chunk(engine: Engine, job_id: int, worker_id: str, chunk: int, output: tuple[int, bytes],
               errors: tuple[int, bytes] | None, progress: float, message: str) -> None:
    """Chunk ``chunk``'s output (rows, bytes) and errors, with the job's progress, in one
    transaction that first checks the job is still this worker's (JobLostError: nothing
    written) and not cancelled (JobCancelledError: nothing written)."""
    with engine.begin() as conn:
        row = conn.execute(
            update(Job).where(*owned(job_id, worker_id))
            .values(progress=progress, message=message, heartbeat_at=utcnow())
            .returning(Job.cancel_requested)).first()
        if row is None:
            raise JobLostError()
        if row[0]:
            raise JobCancelledError()
        conn.execute(insert(BatchPart).values(job_id=job_id, kind=OUTPUT, chunk=chunk,
                                              n_rows=output[0], data=output[1]))
        if errors is not None:
            conn.execute(insert(BatchPart).values(job_id=job_id, kind=ERRORS, chunk=chunk,
                                                  n_rows=errors[0], data=errors[1]))


def totals(session: Session, job_id: int) -> dict[str, int]:
    """Rows written and bad rows found so far, over every chunk."""
    rows = session.execute(
        select(BatchPart.kind, func.coalesce(func.sum(BatchPart.n_rows), 0))
        .where(BatchPart.job_id == job_id, BatchPart.kind.in_((OUTPUT, ERRORS)))
        .group_by(BatchPart.kind)).all()
    counts = {kind: int(n) for kind, n in rows}
    return {"n_rows": counts.get(OUTPUT, 0), "n_errors": counts.get(ERRORS, 0)}


def drop_input(session: Session, job_id: int) -> None:
    session.execute(delete(BatchPart).where(BatchPart.job_id == job_id, BatchPart.kind == INPUT))


class PartsGoneError(RuntimeError):
    """A part listed when a download began was deleted before it was read (the job's files
    expired meanwhile): the download stops there, visibly, rather than end short."""


def parts(engine: Engine, job_id: int, kind: str) -> Iterator[bytes]:
    """The job's ``kind`` parts in chunk order, one at a time (each read on its own); every
    part listed at the start is delivered, or PartsGoneError is raised where one is gone."""
    with engine.connect() as conn:
        chunks = list(conn.scalars(select(BatchPart.chunk).where(
            BatchPart.job_id == job_id, BatchPart.kind == kind).order_by(BatchPart.chunk)))
    for k in chunks:
        with engine.connect() as conn:
            data = conn.scalar(select(BatchPart.data).where(
                BatchPart.job_id == job_id, BatchPart.kind == kind, BatchPart.chunk == k))
        if data is None:
            raise PartsGoneError(f"batch job {job_id}'s {kind} part {k} was deleted while it "
                                 "was read (its files expired): the download is incomplete")
        yield bytes(data)


def has_output(session: Session, job_id: int) -> bool:
    """Whether any chunk's output is stored (what a failed job scored before it stopped)."""
    return session.scalar(select(BatchPart.chunk).where(
        BatchPart.job_id == job_id, BatchPart.kind == OUTPUT).limit(1)) is not None


def stored_rows(session: Session, job_id: int) -> tuple[int, int]:
    """(rows scored, data rows read: scored and bad) over the stored chunks."""
    counts = totals(session, job_id)
    return counts["n_rows"], counts["n_rows"] + counts["n_errors"]


def expire(session: Session, hours: float) -> int:
    """Delete the files of batch jobs that ended more than ``hours`` ago, the inputs of every
    ended job, and the partial outputs of cancelled ones (a failed job keeps what it scored
    for ``hours``, as a succeeded one does); returns the rows deleted."""
    cutoff = utcnow() - timedelta(hours=hours)
    old = select(Job.id).where(Job.kind == BATCH_KIND, Job.finished_at < cutoff)
    ended = select(Job.id).where(Job.kind == BATCH_KIND,
                                 Job.status.not_in(ACTIVE_JOB_STATUSES))
    cancelled = select(Job.id).where(Job.kind == BATCH_KIND, Job.status == "cancelled")
    return session.execute(delete(BatchPart).where(or_(
        BatchPart.job_id.in_(old), BatchPart.job_id.in_(cancelled),
        and_(BatchPart.kind == INPUT, BatchPart.job_id.in_(ended))))).rowcount
