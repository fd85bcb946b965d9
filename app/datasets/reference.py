"""Datasets by reference: register Parquet files that stay where they lie (POST
/datasets/references), and read them back, a file (partition) at a time.

Registering checks the location against ``MSVMAV_DATA_ROOTS`` (``app.datasets.locations``),
runs each file's first pass (``app.datasets.parquet.file_pass``) on the Dask cluster when
``MSVMAV_DASK_SCHEDULER`` is set, else here a row group at a time, and stores the metadata, the
encoding and the reference (not the rows). Later jobs read the files through
``read_partition``: on the cluster (``app.datasets.cluster``) or here, one after the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.problems import ingest_problem, invalid
from app.datasets import locations, parquet
from app.datasets.orm import Dataset, DatasetReference
from app.ingest.errors import IngestError
from app.ingest.labels import label_problem
from solver.parallel import dask_cluster

LOC_URI: list[str | int] = ["body", "uri"]


@dataclass(frozen=True)
class ReferenceOptions:
    """The body of POST /datasets/references."""

    uri: str
    name: str | None = None
    label: str | None = None
    drop: tuple[str, ...] = ()


def roots(settings: Settings) -> list[locations.Location]:
    return locations.roots_of(settings.data_roots)


def map_files(fn: Callable[..., Any], files: list[str], scheduler: str | None, **kwargs: Any
              ) -> list[Any]:
    """``fn(file, **kwargs)`` for every file, in file order: as tasks of the Dask cluster at
    ``scheduler``, or one after the other here."""
    with dask_cluster(scheduler) as client:
        if client is None:
            return [fn(f, **kwargs) for f in files]
        futures = client.map(fn, files, pure=False, **kwargs)
        return client.gather(futures)


def _label_of(files: list[str], label: str | None) -> str:
    """The label column: the one named, else the first file's last column."""
    if label:
        return label
    return parquet.open_checked(files[0]).schema_arrow.names[-1]


def register(session: Session, options: ReferenceOptions, settings: Settings) -> Dataset:
    """Check, first-pass and store a dataset by reference (the caller commits); a file or
    option at fault is a 422 naming the body's field (uri, label or drop)."""
    try:
        return _register(session, options, settings)
    except IngestError as exc:
        field = exc.field if exc.field in ("label", "drop") else "uri"
        raise ingest_problem(exc, ["body", field]) from None


def _register(session: Session, options: ReferenceOptions, settings: Settings) -> Dataset:
    files = locations.files_of(options.uri, roots(settings), LOC_URI)
    label = _label_of(files, options.label)
    passes = map_files(parquet.file_pass, files, settings.dask_scheduler, label=label)
    meta = parquet.combine(passes, label, list(options.drop))
    n_features = len(meta["feature_names"])
    if n_features > settings.max_features:
        raise IngestError(f"{n_features} encoded features; the limit is "
                          f"{settings.max_features} (MSVMAV_MAX_FEATURES)", field="drop")
    if len(meta["classes"]) < 2:
        raise invalid(["body", "label"], f"the label column {label!r} holds a single class")
    problem = label_problem(meta["classes"], meta["class_counts"], label)
    if problem is not None:
        raise invalid(["body", "label"], problem)
    sizes = [_size(f) for f in files]
    listing = [{"path": f, "n_rows": p["n_rows"], "size_bytes": s}
               for f, p, s in zip(files, passes, sizes, strict=True)]
    digest = hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()
    dataset = Dataset(
        name=options.name or options.uri.rstrip("/").rsplit("/", 1)[-1] or "dataset",
        filename=options.uri[:255], format="parquet", n_rows=meta["n_rows"],
        n_features=n_features, n_rows_dropped=0, sparse=False,
        feature_names=meta["feature_names"], classes=meta["classes"],
        class_counts=meta["class_counts"], encoding=meta["encoding"],
        options={"label": label, "drop": list(options.drop)}, sha256=digest,
        size_bytes=sum(sizes),
    )
    dataset.reference = DatasetReference(uri=options.uri, files=listing,
                                         data_min=meta["data_min"], data_max=meta["data_max"])
    session.add(dataset)
    session.flush()
    return dataset


def _size(path: str) -> int:
    if "://" not in path:
        import os

        return os.path.getsize(path)
    import fsspec

    fs, inner = fsspec.core.url_to_fs(path)
    return int(fs.size(inner))


def checked_files(dataset: Dataset, settings: Settings | None = None) -> list[str]:
    """The dataset's files, each checked again against the roots when ``settings`` are given
    (an administrator may have narrowed them since)."""
    assert dataset.reference is not None
    files = [f["path"] for f in dataset.reference.files]
    if settings is not None:
        configured = roots(settings)
        for f in files:
            locations.check(f, configured, LOC_URI)
            if "://" not in f and not locations.resolved_under(f, configured):
                raise locations.forbidden(f"{f!r} now resolves outside the configured roots",
                                          LOC_URI)
    return files


def partitions(dataset: Dataset) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each file's encoded rows and labels, in file order, read here."""
    for f in checked_files(dataset):
        yield parquet.read_partition(f, dataset.encoding)


def load_head(dataset: Dataset, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``max_rows`` rows (or fewer), reading only the files that hold them."""
    blocks, ys, n = [], [], 0
    for block, y in partitions(dataset):
        blocks.append(block[: max_rows - n])
        ys.append(y[: max_rows - n])
        n += len(blocks[-1])
        if n >= max_rows:
            break
    return np.concatenate(blocks), np.concatenate(ys)


def load_local(dataset: Dataset, *, intercept_room: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
    """Every row of a dataset by reference in this process's memory (the local paths:
    a fit without a cluster, a profile, an evaluation), laid out as ``load_arrays``'s."""
    width = dataset.n_features + (1 if intercept_room else 0)
    X = np.empty((dataset.n_rows, width), dtype=np.float64)
    if intercept_room:
        X[:, -1] = 1.0
    ys, start = [], 0
    for block, y in partitions(dataset):
        stop = start + len(block)
        if stop > dataset.n_rows or block.shape[1] != dataset.n_features:
            raise ValueError(f"dataset {dataset.id}'s files changed since they were registered")
        X[start:stop, : dataset.n_features] = block
        ys.append(y)
        start = stop
    if start != dataset.n_rows:
        raise ValueError(f"dataset {dataset.id}'s files changed since they were registered")
    # with intercept_room: the (n, d) view of an (n, d + 1) array, as storage.read_arrays pads
    return X[:, : dataset.n_features], np.concatenate(ys)
