"""Dataset data functions: create from an upload, read, list, delete, load arrays."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import IO

import numpy as np
import scipy.sparse as sp
from sqlalchemy import delete as sql_delete
from sqlalchemy import exists, func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.core import reserve, storage
from app.core.config import Settings
from app.core.db import classify_fault
from app.core.pagination import PageParams, paginate
from app.core.problems import conflict, invalid, not_found, too_large
from app.datasets.orm import Dataset, DatasetArray
from app.ingest import (
    Limits,
    ParsedDataset,
    StreamedDataset,
    parse_dataset,
    parse_upload_stream,
)
from app.ingest.formats import PARQUET_MAGIC
from app.ingest.labels import label_problem
from app.ingest.limits import FieldScanner
from app.jobs.orm import ACTIVE_JOB_STATUSES, Job
from app.models.orm import Model


@dataclass(frozen=True)
class UploadOptions:
    """Form options of POST /datasets, passed on to ``app.ingest.parse_dataset``."""

    name: str | None = None
    format: str | None = None
    label: str | int | None = None
    drop: list[str] | None = None
    missing: str = "error"
    fill_value: str | None = None
    n_features: int | None = None
    header: bool | None = None
    delimiter: str | None = None


def get(session: Session, dataset_id: int) -> Dataset | None:
    return session.get(Dataset, dataset_id)


def get_or_raise(session: Session, dataset_id: int, loc: list[str | int] | None = None) -> Dataset:
    """The dataset; 404, or 422 naming ``loc`` when the id came in the body or query."""
    dataset = get(session, dataset_id)
    if dataset is None:
        raise not_found("dataset", dataset_id, loc)
    return dataset


def lock_or_raise(
    session: Session, dataset_ids: list[int], locs: list[list[str | int]] | None = None
) -> list[Dataset]:
    """The datasets, their rows locked until the transaction ends (``SELECT … FOR UPDATE`` on
    PostgreSQL, in id order; SQLite's ``BEGIN IMMEDIATE`` already serialises writers). Queuing a
    job and deleting a dataset both take it, so they are exclusive: a job is never queued for a
    dataset being deleted. 404 (or 422 naming ``locs[i]``, where the id came from) for a missing
    one."""
    found = {
        d.id: d
        for d in session.scalars(
            select(Dataset)
            .where(Dataset.id.in_(dataset_ids))
            .order_by(Dataset.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    }
    for i, dataset_id in enumerate(dataset_ids):
        if dataset_id not in found:
            raise not_found("dataset", dataset_id, None if locs is None else locs[i])
    return [found[i] for i in dataset_ids]


def list_page(session: Session, page: PageParams) -> tuple[list[Dataset], str | None]:
    return paginate(session, select(Dataset), Dataset.id, page)


@dataclass(frozen=True)
class UploadInfo:
    """One pass over an uploaded file: its size, SHA-256, and whether it is blank or holds a
    NUL byte (binary: read whole, so that the parser words the error)."""

    size: int
    sha256: str
    blank: bool
    has_nul: bool


_READ_BLOCK = 1 << 20
#: starts of files that are not text (their fields are not measured): Parquet, and what the
#: parser refuses as compressed or an Office document
BINARY_HEADS = (PARQUET_MAGIC, b"\x1f\x8b", b"PK\x03\x04", b"\xd0\xcf\x11\xe0", b"BZh")


# The checks of every uploaded file (POST /datasets, /predict/file), each in one place.


def check_upload_size(size: int, settings: Settings) -> None:
    """413 for a file over MSVMAV_MAX_UPLOAD_BYTES (before it is parsed)."""
    if size > settings.max_upload_bytes:
        raise too_large(
            f"file is {size} bytes; the limit is {settings.max_upload_bytes} "
            "(MSVMAV_MAX_UPLOAD_BYTES)",
            field="file",
        )


def check_not_blank(blank: bool) -> None:
    """422 for an empty (or all white space) file."""
    if blank:
        raise invalid(["body", "file"], "the uploaded file is empty")


def check_has_rows(n_rows: int) -> None:
    """422 for a parsed file without a data row."""
    if n_rows == 0:
        raise invalid(["body", "file"], "the file holds no data rows")


def inspect_upload(file: IO[bytes]) -> UploadInfo:
    """One pass over the upload (size, digest, blank, NUL). A text file's fields are measured
    as it goes: one longer than MAX_FIELD_BYTES is refused (413 naming its line) there, before
    anything parses it (a 190 MB field cost 20 s and 1.7 GB once parsed)."""
    file.seek(0)
    digest = hashlib.sha256()
    size, blank, has_nul = 0, True, False
    fields: FieldScanner | None = None
    while block := file.read(_READ_BLOCK):
        if size == 0 and not block.startswith(BINARY_HEADS):
            fields = FieldScanner()
        if fields is not None:
            fields.feed(block)
        digest.update(block)
        size += len(block)
        blank = blank and block.isspace()
        has_nul = has_nul or b"\x00" in block
    file.seek(0)
    return UploadInfo(size=size, sha256=digest.hexdigest(), blank=blank, has_nul=has_nul)


def create(
    session: Session,
    *,
    file: IO[bytes],
    filename: str,
    options: UploadOptions,
    settings: Settings,
    info: UploadInfo | None = None,
) -> Dataset:
    """Parse the uploaded ``file`` and store it (metadata row + arrays) in one transaction.

    A CSV the fast path reads is parsed in chunks and its matrix stored a chunk of rows at a
    time (``parse_upload_stream``); any other file is read whole (``parse_dataset``)."""
    info = info or inspect_upload(file)
    check_upload_size(info.size, settings)
    check_not_blank(info.blank)
    parse_options = {k: v for k, v in asdict(options).items() if k != "name"}
    limits = Limits(
        max_rows=settings.max_rows,
        max_features=settings.max_features,
        max_encoded_bytes=settings.max_encoded_bytes,
    )
    file.seek(0)
    streamed = None
    if not info.has_nul:
        streamed = parse_upload_stream(file, filename, **parse_options, limits=limits)
    if streamed is not None:
        parsed, shape = streamed.meta, (streamed.n_rows, streamed.n_features)
    else:
        file.seek(0)
        parsed = parse_dataset(file.read(), filename, **parse_options, limits=limits)
        shape = parsed.X.shape  # within limits: parse_dataset enforced them
    try:
        dataset = _add_dataset(session, parsed, shape, options, filename, info)
        _store_arrays(session, dataset.id, parsed, streamed, settings.array_chunk_bytes)
    finally:
        if streamed is not None:
            streamed.scan.close()  # its spill file
    session.flush()  # the caller commits (with its Idempotency-Key record, if any)
    return dataset


def _add_dataset(
    session: Session,
    parsed: ParsedDataset,
    shape: tuple[int, int],
    options: UploadOptions,
    filename: str,
    info: UploadInfo,
) -> Dataset:
    n_rows, n_features = shape
    check_has_rows(n_rows)
    if len(parsed.classes) < 2:
        raise invalid(["body", "label"], single_class_message(parsed))
    problem = label_problem(parsed.classes, parsed.class_counts, parsed.encoding.get("label"))
    if problem is not None:
        raise invalid(["body", "label"], problem)
    dataset = Dataset(
        name=options.name or filename or "dataset",
        filename=filename,
        format=parsed.format,
        n_rows=int(n_rows),
        n_features=int(n_features),
        n_rows_dropped=int(parsed.n_rows_dropped),
        sparse=bool(parsed.encoding["sparse"]),
        feature_names=[str(f) for f in parsed.feature_names],
        classes=list(parsed.classes),
        class_counts=[int(c) for c in parsed.class_counts],
        encoding=parsed.encoding,
        options={k: v for k, v in asdict(options).items() if v is not None and k != "name"},
        sha256=info.sha256,
        size_bytes=info.size,
    )
    session.add(dataset)
    session.flush()
    return dataset


def _store_arrays(
    session: Session,
    dataset_id: int,
    parsed: ParsedDataset,
    streamed: StreamedDataset | None,
    chunk: int,
) -> None:
    """X (written a block of rows at a time when streamed and dense) and y."""
    if streamed is None or streamed.sparse:
        X = parsed.X if streamed is None else streamed.matrix()
        storage.write_matrix(session, DatasetArray, dataset_id, "X", X, chunk)
    else:
        # stored in the narrowest exact dtype (int8 for 0/1 data), read back as float64
        dtype = streamed.dtype
        writer = storage.ArrayWriter(session, DatasetArray, dataset_id, "X", chunk)
        writer.write(storage.npy_header((streamed.n_rows, streamed.n_features), dtype))
        rows = 0
        for block in streamed.blocks():
            writer.write(block.astype(dtype, copy=False))
            rows += block.shape[0]
        if rows != streamed.n_rows:
            raise RuntimeError(f"the second pass read {rows} rows, the first {streamed.n_rows}")
        writer.close()
    y = np.asarray(parsed.y)
    if y.dtype == object:
        y = y.astype(str)
    storage.write_array(session, DatasetArray, dataset_id, "y", y, chunk)


def single_class_message(parsed: ParsedDataset) -> str:
    """Why a dataset with one class (or none) cannot be trained on."""
    label = parsed.encoding.get("label")
    where = f"the label column {label!r}" if label is not None else "the label (first field)"
    shown = repr(parsed.classes[0]) if parsed.classes else "nothing"
    return (
        f"{where} holds a single class ({shown} in all {len(parsed.y)} rows); a classifier "
        "needs at least two classes: choose another label column or upload more data"
    )


def load_arrays(
    session: Session, dataset: Dataset, *, intercept_room: bool = False
) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
    """The stored feature matrix (n_rows, n_features; float64, also when it is stored narrower)
    and raw labels (n_rows,). ``intercept_room``: a dense matrix comes as the first columns of
    one with a last column of ones, which a linear fit then uses as its intercept column
    instead of copying the rows (``solver.msvmav.augment``). A dataset by reference is read
    from its files, one after the other (``app.datasets.reference``)."""
    if dataset.reference is not None:
        from app.datasets import reference

        return reference.load_local(dataset, intercept_room=intercept_room)
    arrays = storage.read_arrays(session, DatasetArray, dataset.id, dtypes={"X": np.float64},
                                 pads={"X": 1.0} if intercept_room else None)
    X = storage.arrays_to_matrix("X", arrays)
    if not sp.issparse(X) and X.dtype != np.float64:
        X = X.astype(np.float64)
    return X, arrays["y"]


def stored_nnz(session: Session, dataset: Dataset) -> int | None:
    """Stored values of a CSR dataset (None when dense), read from the npy header of its
    ``X.data`` blob: only the first bytes are fetched, the arrays are not loaded."""
    if not dataset.sparse:
        return None
    head = session.scalar(
        select(func.substr(DatasetArray.data, 1, 256)).where(
            DatasetArray.dataset_id == dataset.id, DatasetArray.name == "X.data",
            DatasetArray.chunk == 0,
        )
    )
    return storage.npy_length(bytes(head)) if head is not None else None


def _used_by_active_experiment(session: Session, dataset_id: int) -> bool:
    """An experiment names several data sets in its params (``jobs.dataset_id`` holds only the
    first); there are few active jobs, so their params are read rather than queried as JSON."""
    params = session.scalars(
        select(Job.params).where(Job.kind == "experiment", Job.status.in_(ACTIVE_JOB_STATUSES))
    )
    return any(dataset_id in (p or {}).get("dataset_ids", ()) for p in params)


def delete(session: Session, dataset_id: int) -> None:
    """Delete a dataset and its blobs; 409 while a queued or running job uses it (the row lock
    makes this exclusive with queuing a job on it). At a full disk (SQLite, whose WAL takes
    every change first) the database's reserve file is released and the delete tried once more
    (``app.core.reserve``): deleting is how space is freed."""
    try:
        _delete(session, dataset_id)
    except SQLAlchemyError as exc:
        fault = classify_fault(exc)
        url = session.get_bind().url.render_as_string(hide_password=False)
        if fault is None or fault.status != 507:
            raise
        session.rollback()
        if not reserve.release(url):
            raise
        _delete(session, dataset_id)
        _checkpoint(session)
        reserve.ensure(url)


def _checkpoint(session: Session) -> None:
    """Move the WAL into the database file and truncate it, so that its room can hold the
    reserve again (best effort: readers may hold it back)."""
    try:
        session.connection().exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        session.commit()
    except SQLAlchemyError:
        session.rollback()


def _delete(session: Session, dataset_id: int) -> None:
    (dataset,) = lock_or_raise(session, [dataset_id])
    busy = session.scalar(
        select(exists().where(Job.dataset_id == dataset_id, Job.status.in_(ACTIVE_JOB_STATUSES)))
    ) or _used_by_active_experiment(session, dataset_id)
    if busy:
        raise conflict(f"dataset {dataset_id} is used by a queued or running job; cancel it first")
    session.execute(sql_delete(DatasetArray).where(DatasetArray.dataset_id == dataset.id))
    # Models keep working (they hold the encoding) but no longer point at the dataset.
    session.execute(update(Model).where(Model.dataset_id == dataset.id).values(dataset_id=None))
    session.delete(dataset)
    session.commit()
