"""Batch scoring of a dataset by reference: the scoring core mapped over the dataset's Parquet
files (partitions) — as tasks of the Dask cluster when MSVMAV_DASK_SCHEDULER is set, else here
one after the other — each writing one Parquet part of the output directory.

Exactly once per partition: a part is written under a temporary name in the output directory
and renamed (``os.replace``, atomic on one file system) to ``part-<k>.parquet``; a partition
whose part already exists is not scored again, so a retried task or a resumed job (another
attempt after a lost worker) never duplicates rows. On an object store (s3://...), where a PUT
is atomic, the part is written under its final name directly.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from app.batch.scoring import output_frame, score
from app.datasets.parquet import read_partition
from app.ingest.readers import parquet

#: the output directory's name, beside the dataset's files (or under MSVMAV_OUTPUT_ROOT)
SCORES_DIR = "_scores-{job_id}"


def output_dir(base: str, job_id: int) -> str:
    """Where job ``job_id`` writes its parts (``base`` checked at submission)."""
    return f"{base.rstrip('/')}/{SCORES_DIR.format(job_id=job_id)}"


def part_name(out_dir: str, k: int) -> str:
    return f"{out_dir}/part-{k:05d}.parquet"


def _fs(path: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(path)


def _exists(path: str) -> bool:
    if "://" not in path:
        return os.path.exists(path)
    fs, inner = _fs(path)
    return bool(fs.exists(inner))


def _write_once(final: str, data: bytes) -> bool:
    """Write ``data`` to ``final`` unless it exists; True if this call wrote it."""
    if "://" in final:
        fs, inner = _fs(final)
        if fs.exists(inner):
            return False
        with fs.open(inner, "wb") as f:
            f.write(data)
        return True
    if os.path.exists(final):
        return False
    os.makedirs(os.path.dirname(final), exist_ok=True)
    temp = f"{os.path.dirname(final)}/.{os.path.basename(final)}.{uuid.uuid4().hex}.tmp"
    with open(temp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, final)  # a retry that raced this one rewrites the same rows
    return True


def score_partition(path: str, k: int, first_row: int, *, loaded: Any, encoding: dict,
                    columns: list[str], id_column: str | None, passthrough: list[str],
                    out_dir: str) -> dict[str, Any]:
    """Score partition ``k`` (the file at ``path``, whose first row is the dataset's row
    ``first_row``) into ``part-<k>.parquet`` of ``out_dir``, unless that part exists."""
    final = part_name(out_dir, k)
    if _exists(final):
        return {"part": final, "n_rows": _rows_of(final), "written": False}
    X, _ = read_partition(path, encoding)
    X = loaded.impute(X, copy=False)
    extra = None
    wanted = [c for c in [id_column, *passthrough] if c]
    if wanted:
        extra = parquet.read(path, wanted).to_pandas()
    ids = extra[id_column].to_numpy() if id_column else np.arange(first_row, first_row + len(X))
    frame = output_frame(loaded, ids, score(loaded, X), columns,
                         extra[passthrough] if passthrough else None)
    written = _write_once(final, _parquet_bytes(frame))
    return {"part": final, "n_rows": len(frame), "written": written}


def _rows_of(part: str) -> int:
    return int(parquet.open_file(part).metadata.num_rows)


def _parquet_bytes(frame: Any) -> bytes:
    import pyarrow as pa

    return parquet.to_bytes(pa.Table.from_pandas(frame, preserve_index=False))


def run_partitions(files: list[str], starts: list[int], task: Callable[..., dict[str, Any]],
                   client: Any, on_done: Callable[[int, int], None]) -> list[dict[str, Any]]:
    """``task(file, k, start)`` for every partition: on the Dask ``client``'s workers (each
    partition a task; ``on_done(done, total)`` as they finish, and raising there cancels the
    rest) or, without a client, here in order. Results in partition order."""
    n = len(files)
    if client is None:
        out = []
        for k, (f, s) in enumerate(zip(files, starts, strict=True)):
            out.append(task(f, k, s))
            on_done(k + 1, n)
        return out
    from distributed import as_completed

    futures = client.map(task, files, list(range(n)), starts, pure=False)
    try:
        for done, _ in enumerate(as_completed(futures, loop=client.loop), start=1):
            on_done(done, n)
        return client.gather(futures)
    finally:
        client.cancel([f for f in futures if not f.done()])
