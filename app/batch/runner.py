"""The worker's runner for ``batch_predict`` jobs (``BATCH``, registered in
``app.jobs.registry``): read the input a chunk at a time, score each chunk, and write its
output (and its bad rows) in one transaction under the job's lease. A chunk an earlier attempt
wrote is read past, not scored again, so a worker killed mid-file resumes from its last
finished chunk and the result holds every row exactly once."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlalchemy.orm import Session

from app.batch import partitions, store
from app.batch.readers import Chunk, Layout, oversized, read_chunks
from app.batch.schemas import ERRORS_SHOWN, BatchJob
from app.batch.scoring import RowErrors, encode_chunk, output_frame, score
from app.core.problems import Problem
from app.core.runtime import runtime_of
from app.datasets import reference
from app.datasets import service as datasets
from app.ingest import Encoder
from app.ingest.readers import parquet
from app.jobs.kinds import JobKind
from app.jobs.runtime import JobContext, JobResult
from app.models import service as models
from app.models.features import dataset_features
from app.serving.acquire import acquire
from app.serving.model import ServedModel
from app.serving.target import Target
from solver import dask_cluster


class BadRowError(ValueError):
    """on_error="fail" and a row cannot be scored (the job's error names it)."""


def _load_model(ctx: JobContext, job: BatchJob) -> ServedModel:
    with ctx.sessions() as session:
        try:
            loaded = acquire(runtime_of(session), Target(job.model_id), 0.0, None,
                             session=session).model
        except Problem:
            raise ValueError(f"model {job.model_id} no longer exists") from None
    if job.decision_rule is not None:  # the reference's rule when the job was submitted
        loaded = replace(loaded, rule=job.decision_rule.get("rule"))
    return loaded


def _dataset_chunks(ctx: JobContext, job: BatchJob) -> Iterator[Chunk]:
    """A stored dataset's rows (already encoded) in chunks; the matrix is the dataset's."""
    with ctx.sessions() as session:
        dataset = datasets.get(session, job.dataset_id) if job.dataset_id else None
        if dataset is None:
            raise ValueError(f"dataset {job.dataset_id} no longer exists")
        X, _ = datasets.load_arrays(session, dataset)
        model = models.get(session, job.model_id)
        if model is not None:  # without the model's weight column
            X = dataset_features(X, dataset, model)
    n = X.shape[0]
    for start in range(0, n, job.chunk_rows):
        stop = min(start + job.chunk_rows, n)
        block = X[start:stop]
        block = np.asarray(block.todense() if hasattr(block, "todense") else block,
                           dtype=np.float64).copy()
        rows = np.arange(start, stop)
        yield Chunk(pd.DataFrame(index=range(stop - start)), start, stop - start, rows,
                    rows + 1, stop / n, X=block)


def _file_chunks(ctx: JobContext, job: BatchJob, encoding: dict) -> Iterator[Chunk]:
    source = io.BufferedReader(store.InputReader(ctx.engine, ctx.job_id, job.size),
                               buffer_size=1024 * 1024)
    encoder = Encoder.from_dict(encoding)
    layout = Layout(fmt=job.format, delimiter=job.delimiter, header=job.header,
                    names=job.names, chunk_rows=job.chunk_rows,
                    features=[] if job.format == "svmlight" else list(encoder.names),
                    text_columns=[c for c in [job.id_column, *job.passthrough] if c],
                    skip_lines=job.skip_lines, max_columns=ctx.settings.max_features,
                    encoding=encoding)
    yield from read_chunks(source, job.size, layout)


def _bad_rows(chunk: Chunk, errors: RowErrors) -> list[tuple[int, int, str, str]]:
    """Every bad row of the chunk, once, in row order: (row, line, column, reason); a bad
    line (not a row at all) has no column."""
    out = [(b.row, b.line, "", b.reason) for b in chunk.bad]
    seen = set(errors.positions)
    out += [(int(chunk.rows[p]), int(chunk.lines[p]), c, r)
            for p, c, r in zip(errors.positions, errors.columns, errors.reasons, strict=True)]
    out += [(int(chunk.rows[p]), int(chunk.lines[p]), "", r)
            for p, r in oversized(chunk.extra).items() if p not in seen]
    return sorted(out)


def _error_bytes(bad: list[tuple[int, int, str, str]]) -> tuple[int, bytes]:
    frame = pd.DataFrame(bad, columns=["row", "line", "column", "reason"])
    return len(frame), frame.to_csv(index=False, header=False).encode()


def _output_table(loaded: ServedModel, job: BatchJob, chunk: Chunk, keep: np.ndarray,
                  X: Any) -> pa.Table:
    """The kept rows scored, as the output table; the id and pass-through columns as the
    input typed them (Parquet's and JSON's types; text formats' fields are text)."""
    frame = output_frame(loaded, chunk.rows[keep], score(loaded, X), job.columns, None)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    extra = chunk.extra.filter(pa.array(keep)) if chunk.extra is not None else None
    if job.id_column and extra is not None:
        table = table.set_column(0, job.id_column, extra.column(job.id_column))
    for name in job.passthrough:
        assert extra is not None
        table = table.append_column(name, extra.column(name))
    return table


def _score_chunk(loaded: ServedModel, encoder: Encoder, job: BatchJob, chunk: Chunk
                 ) -> tuple[tuple[int, bytes], tuple[int, bytes] | None, BadRowError | None]:
    """One chunk's output and errors, as the bytes stored for them; with on_error=fail and a
    bad row, the rows before it (output) and the error that stops the job."""
    errors = RowErrors()
    if chunk.X is None:
        X, errors = encode_chunk(encoder, chunk.frame)
    else:  # rows already encoded: their missing cells take the model's fills
        X = loaded.impute(chunk.X, copy=False)
    bad = _bad_rows(chunk, errors)
    keep = ~np.isin(chunk.rows, [b[0] for b in bad])
    stop = None
    if bad and job.on_error == "fail":
        row, line, column, reason = bad[0]
        # a Parquet file has rows, not lines: its "line" is the 1-based row
        place = f"{'row' if job.format == 'parquet' else 'line'} {line}"
        where = f"{place}, column {column!r}" if column else place
        stop = BadRowError(f"{where}: {reason} (on_error=skip leaves bad rows out and "
                           "lists them)")
        keep &= chunk.rows < row
        bad = []
    table = _output_table(loaded, job, chunk, keep, X[keep] if not keep.all() else X)
    out = (table.num_rows, parquet.to_bytes(table))
    return out, (_error_bytes(bad) if bad else None), stop


def _run_reference(ctx: JobContext, job: BatchJob, loaded: ServedModel) -> JobResult:
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
              "written": sum(bool(p["written"]) for p in parts),
              "decision_rule": job.decision_rule}
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
              else _file_chunks(ctx, job, loaded.encoding))
    k, read = -1, 0
    try:
        for k, chunk in enumerate(chunks):
            ctx.reporter.due()  # (raises when the worker is stopping)
            if k not in done:
                out, errors, stop = _score_chunk(loaded, encoder, job, chunk)
                store.save_chunk(ctx.engine, ctx.job_id, ctx.worker_id, k, out, errors,
                                 min(chunk.fraction, 0.99), f"chunk {k + 1}: "
                                 f"{chunk.first_row + chunk.n_rows} rows read")
                if stop is not None:
                    raise stop
            read = chunk.first_row + chunk.n_rows
    except ValueError as exc:
        raise _stopped(ctx, exc, read) from None

    with ctx.sessions() as session:
        counts = store.totals(session, ctx.job_id)

    def write(session: Session) -> dict[str, Any]:
        shown = _first_errors(ctx, ERRORS_SHOWN)
        store.drop_input(session, ctx.job_id)
        result = {"model_id": job.model_id, "chunks": k + 1, **counts, "errors": shown,
                  "columns": job.columns, "output": job.output,
                  "result_url": f"/batch-predictions/{ctx.job_id}/result",
                  "errors_url": f"/batch-predictions/{ctx.job_id}/errors",
                  "decision_rule": job.decision_rule}
        return {"result": result}

    message = f"scored {counts['n_rows']} rows in {k + 1} chunks"
    if counts["n_errors"]:
        message += f"; {counts['n_errors']} bad rows left out (see errors_url)"
    return JobResult(write=write, message=message)


def _stopped(ctx: JobContext, exc: ValueError, read: int) -> ValueError:
    """The job's error: the cause, and what it keeps: the rows scored before it stopped (every
    row of the chunks before, and, for a bad row under on_error=fail, its chunk's rows before
    it), served by the result download."""
    with ctx.sessions() as session:
        counts = store.totals(session, ctx.job_id)
    where = "" if isinstance(exc, BadRowError) else f" (after data row {read})"
    kind = BadRowError if isinstance(exc, BadRowError) else ValueError
    return kind(f"{exc}{where}; the {counts['n_rows']} rows scored before it stopped are "
                     f"kept: GET /batch-predictions/{ctx.job_id}/result serves them")


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
