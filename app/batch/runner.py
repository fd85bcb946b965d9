"""The worker's runner for ``batch_predict`` jobs (``BATCH``, registered in
``app.jobs.registry``): read the input a chunk at a time, score each chunk, and write its
output (and its bad rows) in one transaction under the job's lease. A chunk an earlier attempt
wrote is read past, not scored again, so a worker killed mid-file resumes from its last
finished chunk and the result holds every row exactly once."""

from __future__ import annotations

import io
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.orm import Session

from app.batch import partitions, store
from app.batch.formats import Chunk, read_chunks
from app.batch.schemas import ERRORS_SHOWN, BatchJob
from app.batch.scoring import RowErrors, encode_chunk, output_frame, score
from app.datasets import reference
from app.datasets import service as datasets
from app.ingest import Encoder
from app.jobs.kinds import JobKind
from app.jobs.runtime import JobContext, JobResult
from app.models import service as models
from solver.parallel import dask_cluster


class BadRowError(ValueError):
    """on_error="fail" and a row cannot be scored (the job's error names it)."""


def _load_model(ctx: JobContext, job: BatchJob) -> models.LoadedModel:
    with ctx.sessions() as session:
        model = models.get(session, job.model_id)
        if model is None:
            raise ValueError(f"model {job.model_id} no longer exists")
        return models.load(session, model)


def _dataset_chunks(ctx: JobContext, job: BatchJob) -> Iterator[tuple[Chunk, np.ndarray]]:
    """A stored dataset's rows (already encoded) in chunks; the matrix is the dataset's."""
    with ctx.sessions() as session:
        dataset = datasets.get(session, job.dataset_id) if job.dataset_id else None
        if dataset is None:
            raise ValueError(f"dataset {job.dataset_id} no longer exists")
        X, _ = datasets.load_arrays(session, dataset)
    n = X.shape[0]
    for start in range(0, n, job.chunk_rows):
        stop = min(start + job.chunk_rows, n)
        block = X[start:stop]
        block = np.asarray(block.todense() if hasattr(block, "todense") else block,
                           dtype=np.float64).copy()
        lines = np.arange(start + 1, stop + 1)
        yield Chunk(pd.DataFrame(index=range(stop - start)), start, lines, stop / n), block


def _file_chunks(ctx: JobContext, job: BatchJob) -> Iterator[tuple[Chunk, Any]]:
    source = io.BufferedReader(store.InputReader(ctx.engine, ctx.job_id, job.size),
                               buffer_size=1024 * 1024)
    text_columns = [c for c in [job.id_column, *job.passthrough] if c]
    for chunk in read_chunks(source, job.size, fmt=job.format, delimiter=job.delimiter,
                             header=job.header, names=job.names, chunk_rows=job.chunk_rows,
                             text_columns=text_columns, skip_lines=job.skip_lines):
        yield chunk, None


def _error_bytes(chunk: Chunk, errors: RowErrors) -> tuple[int, bytes]:
    pos = np.asarray(errors.positions, dtype=np.int64)
    frame = pd.DataFrame({"row": chunk.first_row + pos, "line": chunk.lines[pos],
                          "column": errors.columns, "reason": errors.reasons})
    return len(frame), frame.to_csv(index=False, header=False).encode()


def _output_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    if fmt == "csv":
        return frame.to_csv(index=False, header=False).encode()
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buf)
    return buf.getvalue()


def _score_chunk(loaded: models.LoadedModel, encoder: Encoder, job: BatchJob, chunk: Chunk,
                 X: Any) -> tuple[tuple[int, bytes], tuple[int, bytes] | None]:
    """One chunk's output and errors, as the bytes stored for them."""
    errors = RowErrors()
    if X is None:
        X, errors = encode_chunk(encoder, chunk.frame)
    else:  # a stored dataset's rows: its missing cells take the model's fills
        X = loaded.impute(X, copy=False)
    if errors.positions and job.on_error == "fail":
        line = int(chunk.lines[errors.positions[0]])
        raise BadRowError(
            f"line {line}, column {errors.columns[0]!r}: {errors.reasons[0]} "
            "(on_error=skip leaves bad rows out and lists them)")
    keep = np.ones(len(X), dtype=bool)
    keep[errors.positions] = False
    X = X[keep] if errors.positions else X
    if job.id_column:
        ids = chunk.frame[job.id_column].to_numpy()[keep]
    else:
        ids = np.arange(chunk.first_row, chunk.first_row + len(keep))[keep]
    extra = chunk.frame.loc[keep, job.passthrough] if job.passthrough else None
    scores, idx, proba = score(loaded, X)
    frame = output_frame(loaded, ids, scores, idx, proba, job.columns, extra)
    out = (len(frame), _output_bytes(frame, job.output))
    return out, (_error_bytes(chunk, errors) if errors.positions else None)


def _run_reference(ctx: JobContext, job: BatchJob, loaded: models.LoadedModel) -> JobResult:
    """A dataset by reference: each partition scored where it lies (on the cluster when one is
    configured) into a Parquet part of the output directory, exactly once."""
    with ctx.sessions() as session:
        dataset = datasets.get(session, job.dataset_id) if job.dataset_id else None
        if dataset is None or dataset.reference is None:
            raise ValueError(f"dataset {job.dataset_id} no longer exists")
        files = reference.checked_files(dataset, ctx.settings)
        rows = [int(f["n_rows"]) for f in dataset.reference.files]
        encoding = dataset.encoding
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(int).tolist()
    assert job.output_base is not None
    out_dir = partitions.output_dir(job.output_base, ctx.job_id)
    task = partial(partitions.score_partition, loaded=loaded, encoding=encoding,
                   columns=job.columns, id_column=job.id_column, passthrough=job.passthrough,
                   out_dir=out_dir)
    ctx.reporter.report(0.0, f"scoring {len(files)} partitions with model {job.model_id}")

    def on_done(done: int, n: int) -> None:
        if ctx.reporter.due():
            ctx.reporter.report(min(done / n, 0.99), f"{done}/{n} partitions scored")

    with dask_cluster(ctx.settings.dask_scheduler) as client:
        parts = partitions.run_partitions(files, starts, task, client, on_done)
    n_rows = sum(p["n_rows"] for p in parts)
    result = {"model_id": job.model_id, "chunks": len(parts), "n_rows": n_rows, "n_errors": 0,
              "errors": [], "columns": job.columns, "output": "parquet", "output_uri": out_dir,
              "parts": [p["part"] for p in parts],
              "written": sum(bool(p["written"]) for p in parts)}
    return JobResult(write=lambda session: {"result": result},
                     message=f"scored {n_rows} rows in {len(parts)} partitions into {out_dir}")


def run_batch_job(ctx: JobContext, job: BatchJob) -> JobResult:
    loaded = _load_model(ctx, job)
    if job.source == "reference":
        return _run_reference(ctx, job, loaded)
    encoder = Encoder.from_dict(loaded.encoding)
    done = store.done_chunks(ctx.engine, ctx.job_id)
    ctx.reporter.report(0.0, f"scoring with model {job.model_id}"
                             + (f", resuming after {len(done)} chunks" if done else ""))
    chunks = (_dataset_chunks(ctx, job) if job.source == "dataset"
              else _file_chunks(ctx, job))
    k = -1
    for k, (chunk, X) in enumerate(chunks):
        ctx.reporter.due()  # (raises when the worker is stopping)
        if k in done:
            continue
        out, errors = _score_chunk(loaded, encoder, job, chunk, X)
        store.save_chunk(ctx.engine, ctx.job_id, ctx.worker_id, k, out, errors,
                         min(chunk.fraction, 0.99), f"chunk {k + 1}: "
                         f"{chunk.first_row + len(chunk.frame)} rows read")

    with ctx.sessions() as session:
        counts = store.totals(session, ctx.job_id)

    def write(session: Session) -> dict[str, Any]:
        shown = _first_errors(ctx, ERRORS_SHOWN)
        store.drop_input(session, ctx.job_id)
        result = {"model_id": job.model_id, "chunks": k + 1, **counts, "errors": shown,
                  "columns": job.columns, "output": job.output,
                  "result_url": f"/batch-predictions/{ctx.job_id}/result",
                  "errors_url": f"/batch-predictions/{ctx.job_id}/errors"}
        return {"result": result}

    message = f"scored {counts['n_rows']} rows in {k + 1} chunks"
    if counts["n_errors"]:
        message += f"; {counts['n_errors']} bad rows left out (see errors_url)"
    return JobResult(write=write, message=message)


def _first_errors(ctx: JobContext, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` bad rows (row, line, column, reason), from the errors parts."""
    shown: list[dict[str, Any]] = []
    for data in store.parts(ctx.engine, ctx.job_id, store.ERRORS):
        frame = pd.read_csv(io.BytesIO(data), header=None,
                            names=["row", "line", "column", "reason"],
                            dtype={"column": str, "reason": str}, keep_default_na=False)
        shown += frame.head(limit - len(shown)).to_dict("records")
        if len(shown) >= limit:
            break
    return [{k: (int(v) if k in ("row", "line") else v) for k, v in e.items()} for e in shown]


BATCH = JobKind(store.BATCH_KIND, BatchJob, run_batch_job)
