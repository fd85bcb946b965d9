"""Dataset data functions: create from an upload, read, list, delete, load arrays."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp
from sqlalchemy import delete as sql_delete
from sqlalchemy import exists, select, update
from sqlalchemy.orm import Session

from app.core import storage
from app.core.config import Settings
from app.core.orm import ACTIVE_JOB_STATUSES, Dataset, DatasetArray, Job, Model
from app.core.pagination import PageParams, paginate
from app.core.problems import conflict, invalid, not_found, too_large
from app.ingest import Limits, ParsedDataset, parse_dataset


@dataclass(frozen=True)
class UploadOptions:
    """Form options of POST /datasets, passed on to ``app.ingest.parse_dataset``."""

    name: str | None = None
    format: str | None = None
    label: str | int | None = None
    drop: list[str] | None = None
    missing: str = "error"
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


def create(
    session: Session, *, content: bytes, filename: str, options: UploadOptions, settings: Settings
) -> Dataset:
    """Parse ``content`` and store it (metadata row + array blobs) in one transaction."""
    if len(content) > settings.max_upload_bytes:
        raise too_large(
            f"file is {len(content)} bytes; the limit is {settings.max_upload_bytes} "
            "(MSVMAV_MAX_UPLOAD_BYTES)",
            field="file",
        )
    if not content or content.isspace():  # (not content.strip(): no copy of the upload)
        raise invalid(["body", "file"], "the uploaded file is empty")
    limits = Limits(
        max_rows=settings.max_rows,
        max_features=settings.max_features,
        max_encoded_bytes=settings.max_encoded_bytes,
    )
    parsed = parse_dataset(
        content,
        filename,
        format=options.format,
        label=options.label,
        drop=options.drop,
        missing=options.missing,
        n_features=options.n_features,
        header=options.header,
        delimiter=options.delimiter,
        limits=limits,
    )
    n_rows, n_features = parsed.X.shape  # within limits: parse_dataset enforced them
    if n_rows == 0:
        raise invalid(["body", "file"], "the file holds no data rows")
    if len(parsed.classes) < 2:
        raise invalid(["body", "label"], single_class_message(parsed))
    y = np.asarray(parsed.y)
    if y.dtype == object:
        y = y.astype(str)

    dataset = Dataset(
        name=options.name or filename or "dataset",
        filename=filename,
        format=parsed.format,
        n_rows=int(n_rows),
        n_features=int(n_features),
        n_rows_dropped=int(parsed.n_rows_dropped),
        sparse=bool(sp.issparse(parsed.X)),
        feature_names=[str(f) for f in parsed.feature_names],
        classes=list(parsed.classes),
        class_counts=[int(c) for c in parsed.class_counts],
        encoding=parsed.encoding,
        options={k: v for k, v in asdict(options).items() if v is not None and k != "name"},
        sha256=hashlib.sha256(content).hexdigest(),
        size_bytes=len(content),
    )
    session.add(dataset)
    session.flush()
    chunk = settings.array_chunk_bytes
    storage.write_matrix(session, DatasetArray, dataset.id, "X", parsed.X, chunk)
    storage.write_array(session, DatasetArray, dataset.id, "y", y, chunk)
    session.flush()  # the caller commits (with its Idempotency-Key record, if any)
    return dataset


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
    session: Session, dataset: Dataset
) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray]:
    """The stored feature matrix (n_rows, n_features) and raw labels (n_rows,)."""
    arrays = storage.read_arrays(session, DatasetArray, dataset.id)
    return storage.arrays_to_matrix("X", arrays), arrays["y"]


def _used_by_active_experiment(session: Session, dataset_id: int) -> bool:
    """An experiment names several data sets in its params (``jobs.dataset_id`` holds only the
    first); there are few active jobs, so their params are read rather than queried as JSON."""
    params = session.scalars(
        select(Job.params).where(Job.kind == "experiment", Job.status.in_(ACTIVE_JOB_STATUSES))
    )
    return any(dataset_id in (p or {}).get("dataset_ids", ()) for p in params)


def delete(session: Session, dataset_id: int) -> None:
    """Delete a dataset and its blobs; 409 while a queued or running job uses it (the row lock
    makes this exclusive with queuing a job on it)."""
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
