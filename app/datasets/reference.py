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
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.problems import Problem, ingest_problem, invalid
from app.datasets import locations, parquet
from app.datasets.orm import Dataset, DatasetReference
from app.ingest.errors import IngestError
from app.ingest.labels import label_problem
from app.ingest.readers.parquet import ParquetReadError
from solver import dask_cluster

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
    stamps = [stamp(f) for f in files]
    listing = [{"path": f, "n_rows": p["n_rows"], **s}
               for f, p, s in zip(files, passes, stamps, strict=True)]
    sizes = [s["size_bytes"] for s in stamps]
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


class ReferenceChangedError(Problem, ValueError):
    """A file of a dataset by reference changed since it was registered (its size, its
    modification time or etag, or where it resolves), or is gone: a 409 naming the file (a
    path under a root), and a job's error as it says."""

    def __init__(self, path: str, what: str):
        super().__init__(409, f"{path}: {what} since the dataset was registered; register "
                         "it again to use the files as they are now",
                         type="urn:msvmav:problem:reference-changed", title="Conflict",
                         errors=[{"loc": LOC_URI, "field": "uri", "message": what}])


def stamp(path: str) -> dict[str, Any]:
    """What identifies a file's contents without reading them: its size and, locally, its
    modification time (ns) and real path; remotely, its etag or modification time as the
    store reports them."""
    if "://" not in path:
        info = os.stat(path)
        return {"size_bytes": info.st_size, "mtime_ns": info.st_mtime_ns,
                "real": os.path.realpath(path)}
    import fsspec

    fs, inner = fsspec.core.url_to_fs(path)
    info = fs.info(inner)
    out: dict[str, Any] = {"size_bytes": int(info.get("size") or 0)}
    for key in ("ETag", "etag", "md5Hash", "mtime", "LastModified", "last_modified",
                "Last-Modified", "updated"):
        if info.get(key) is not None:
            out["version"] = f"{key}={info[key]}"
            break
    return out


def _changed(recorded: dict[str, Any], path: str) -> str | None:
    """What differs between a file now and as registered (None: nothing the stamp shows)."""
    try:
        now = stamp(path)
    except OSError:
        return "the file is gone or cannot be read"
    if recorded.get("real") is not None and now.get("real") != recorded["real"]:
        return "the path resolves to another file (a symbolic link changed)"
    for key, what in (("size_bytes", "its size"), ("mtime_ns", "its modification time"),
                      ("version", "its version (etag or modification time)")):
        if recorded.get(key) is not None and now.get(key) != recorded[key]:
            return f"{what} changed"
    return None


def checked_files(dataset: Dataset, settings: Settings | None = None) -> list[str]:
    """The dataset's files, each re-resolved and checked again at every read: against the
    roots when ``settings`` are given (an administrator may have narrowed them since), and
    against what registration recorded (real path, size, modification time or etag: a
    change is a ``ReferenceChangedError``, 409)."""
    assert dataset.reference is not None
    configured = roots(settings) if settings is not None else None
    files = []
    for f in dataset.reference.files:
        path = f["path"]
        if configured is not None:
            locations.check(path, configured, LOC_URI)
            if "://" not in path and not locations.resolved_under(path, configured):
                raise locations.forbidden(f"{path!r} now resolves outside the configured "
                                          "roots", LOC_URI)
        what = _changed(f, path)
        if what is not None:
            raise ReferenceChangedError(path, what)
        files.append(path)
    return files


def partitions(dataset: Dataset) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each file's encoded rows and labels, in file order, read here."""
    import pyarrow as pa

    for f in checked_files(dataset):
        try:
            part = parquet.read_partition(f, dataset.encoding)
        # a column gone, or of another type
        except (KeyError, pa.ArrowException, ParquetReadError) as exc:
            raise ReferenceChangedError(f, f"its columns or their types changed "
                                        f"({type(exc).__name__})") from None
        yield part


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
            raise ReferenceChangedError(dataset.reference.uri, "the files' rows changed")
        X[start:stop, : dataset.n_features] = block
        ys.append(y)
        start = stop
    if start != dataset.n_rows:
        raise ReferenceChangedError(dataset.reference.uri, "the files' rows changed")
    # with intercept_room: the (n, d) view of an (n, d + 1) array, as storage.read_arrays pads
    return X[:, : dataset.n_features], np.concatenate(ys)
