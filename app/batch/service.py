"""Batch scoring data functions: check a POST /batch-predictions request against its model and
input and queue the job (the file stored with it); stream a finished job's result and errors."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import IO, Any

import pyarrow as pa
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.batch import store
from app.batch.formats import INPUT_FORMATS, FormatError, detect_format, head_columns
from app.batch.schemas import BatchJob, OnError, OutputFormat
from app.batch.scoring import output_columns
from app.core.config import Settings
from app.core.orm import utcnow
from app.core.problems import Problem, conflict, invalid, missing, too_large
from app.core.runtime import runtime_of
from app.datasets import locations
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.ingest import Encoder, IngestError
from app.ingest.arff import arff_header
from app.ingest.column_specs import same_layout
from app.ingest.csv_format import sniff_delimiter
from app.ingest.readers import parquet
from app.ingest.text import is_number, preview
from app.jobs import service as jobs
from app.jobs.orm import Job
from app.models import service as models
from app.models.features import feature_match
from app.models.orm import Model
from app.serving.acquire import acquire
from app.serving.codec import decision_for
from app.serving.scoring import class_values
from app.serving.target import Target, resolve_target, target_of

_SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class BatchOptions:
    """The form fields of POST /batch-predictions."""

    model_id: int | None = None
    model: str | None = None
    dataset_id: int | None = None
    format: str | None = None
    delimiter: str | None = None
    header: bool | None = None
    id_column: str | None = None
    passthrough: list[str] | None = None
    output: OutputFormat | None = None  # csv, or parquet for a dataset by reference
    on_error: OnError = "fail"
    chunk_rows: int | None = None
    rule: str | None = None  # the job's own decision rule (app.serving.codec.decision_for)
    threshold: float | None = None
    max_columns: int = 200_000  # MSVMAV_MAX_FEATURES
    route_key: str | None = None  # an alias's canary: the arm the whole job is scored by


def _body(name: str) -> list[str | int]:
    return ["body", name]


def _model(session: Session, options: BatchOptions) -> tuple[Model, str | None, Target]:
    # (a job by an alias with a canary is scored by one arm, chosen here: X-Msvmav-Route-Key)
    target = target_of(options.model_id, options.model, _body("model"), routed=True,
                       route_key=options.route_key)
    target = resolve_target(runtime_of(session), target, _body("model"))
    assert target.model_id is not None
    model = models.get_or_raise(session, target.model_id, _body("model_id"))
    return model, options.model, target


def _headerless_names(encoder: Encoder, width: int) -> list[str]:
    """A headerless file's column names: the training file's columns (with or without its
    label), or the features alone, by the file's width."""
    inputs = list(encoder.encoding.get("input_columns", encoder.names))
    for names in (inputs, encoder.non_label, encoder.names):
        if len(names) == width:
            return names
    raise invalid(_body("file"), f"the file has {width} columns and no header; expected "
                  f"{len(inputs)} (as in training) or {len(encoder.names)} feature columns: "
                  f"{preview(encoder.names)}")


def _sniff_header(file: IO[bytes], fmt: str, delimiter: str | None) -> bool:
    """A text file has a header unless its first line is all numbers."""
    head = file.read(_SNIFF_BYTES)
    file.seek(0)
    first = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    sep = None if fmt == "whitespace" else ("\t" if fmt == "tsv" else (delimiter or ","))
    cells = [c.strip().strip('"') for c in first.split(sep)]
    return not all(is_number(c) for c in cells if c)


def _file_layout(file: IO[bytes], filename: str, options: BatchOptions, encoder: Encoder
                 ) -> dict[str, Any]:
    """The upload's format, header and column names, from its first bytes; 422 for a file
    lacking a feature, the id column or a pass-through column."""
    head = file.read(_SNIFF_BYTES)
    file.seek(0)
    if encoder.encoding.get("format") == "svmlight":
        return _svmlight_layout(options, encoder)
    fmt = detect_format(head, filename, options.format)
    if fmt == "svmlight":
        raise invalid(_body("format"), "svmlight rows are scored only by a model trained on "
                      "an svmlight file; this model takes the columns "
                      f"{preview(encoder.names)}")
    if fmt not in ("parquet", "arff") and b"\n" not in head and len(head) == _SNIFF_BYTES:
        raise invalid(_body("file"), f"the first line is longer than {_SNIFF_BYTES} bytes: "
                      "the header (or first row) must fit in them")
    if fmt == "arff":
        return _arff_layout(file, options, encoder)
    delimiter = options.delimiter
    if delimiter == "whitespace":
        fmt = "whitespace"
    elif fmt == "csv" and delimiter is None:
        delimiter = sniff_delimiter(head.decode("utf-8", errors="replace"))
    if fmt in ("parquet", "jsonl"):
        header = True
    else:
        header = options.header if options.header is not None else _sniff_header(
            file, fmt, delimiter)
    try:
        columns = head_columns(file, fmt, delimiter, header)
    except FormatError as exc:
        raise invalid(_body("file"), str(exc)) from None
    names = None if header else _headerless_names(encoder, len(columns))
    _check_columns(names or columns, encoder, options)
    return {"format": fmt, "header": header, "names": names, "delimiter": delimiter}


_ARFF_HEADER_BYTES = 1024 * 1024


def _arff_layout(file: IO[bytes], options: BatchOptions, encoder: Encoder) -> dict[str, Any]:
    """A dense ARFF file: its attributes (from a header within its first MiB) are the columns,
    its rows are read after the @data line."""
    head = file.read(_ARFF_HEADER_BYTES)
    file.seek(0)
    text = head.decode("utf-8", errors="replace")
    try:
        names, data_line = arff_header(text)
    except IngestError as exc:
        raise invalid(_body("file"), str(exc)) from None
    rest = text.split("\n", data_line)[-1].lstrip()
    if rest.startswith("{"):
        raise invalid(_body("file"), "sparse ARFF rows ({index value, ...}) cannot be scored "
                      "in a batch job: use /predict/file, or write the rows dense")
    _check_columns(names, encoder, options)
    return {"format": "arff", "header": False, "names": names, "delimiter": ",",
            "skip_lines": data_line}


def _svmlight_layout(options: BatchOptions, encoder: Encoder) -> dict[str, Any]:
    """A model trained on svmlight scores svmlight rows (the label field read past): no
    columns to name, so no id or pass-through column."""
    if options.format not in (None, "svmlight"):
        raise invalid(_body("format"), "this model was trained on an svmlight file: it "
                      "scores svmlight rows (format=svmlight)")
    if options.id_column or options.passthrough:
        raise invalid(_body("id_column" if options.id_column else "passthrough"),
                      "svmlight rows have no named columns: their rows are numbered")
    return {"format": "svmlight", "header": False, "names": None, "delimiter": None}


def _check_columns(present: list[str], encoder: Encoder, options: BatchOptions) -> None:
    """422 for a file lacking a feature, the id column or a pass-through column, or naming a
    column twice; 413 for more columns than MSVMAV_MAX_FEATURES (a chunk's table grows with
    them)."""
    if len(present) > options.max_columns:
        raise too_large(f"the file has {len(present)} columns; at most {options.max_columns} "
                        "(MSVMAV_MAX_FEATURES)", field="file")
    twice = next((c for i, c in enumerate(present) if c in present[:i]), None)
    if twice is not None:
        raise invalid(_body("file"), f"the file has two columns named {twice!r}; rename one",
                      column=twice)
    absent = [n for n in encoder.names if n not in present]
    if absent:
        raise invalid(_body("file"), f"the file lacks the model's feature columns "
                      f"{preview(absent)}; it has {preview(present)}", column=absent[0])
    for field, wanted in (("id_column", [options.id_column]),
                          ("passthrough", options.passthrough or [])):
        lacking = [c for c in wanted if c and c not in present]
        if lacking:
            raise invalid(_body(field), f"no column {lacking[0]!r} in the file; it has "
                          f"{preview(present)}")


def _dataset_source(session: Session, options: BatchOptions, model: Model,
                    settings: Settings) -> dict[str, Any]:
    (dataset,) = datasets.lock_or_raise(session, [options.dataset_id], [_body("dataset_id")])
    if not (same_layout(dataset.encoding, model.encoding)
            or (feature_match(dataset, model) and dataset.id == model.dataset_id)):
        raise invalid(_body("dataset_id"), f"dataset {dataset.id} is not encoded as model "
                      f"{model.id}'s training data; upload its file instead")
    if dataset.reference is not None:
        return _reference_source(dataset, options, settings)
    if options.id_column or options.passthrough:
        raise invalid(_body("id_column" if options.id_column else "passthrough"),
                      "a stored dataset keeps only its encoded features: its rows are "
                      "numbered; upload the file to name an id or pass-through column")
    return {"source": "dataset", "dataset_id": dataset.id, "format": "dataset"}


def _reference_source(dataset: Dataset, options: BatchOptions, settings: Settings
                      ) -> dict[str, Any]:
    """A dataset by reference is scored where it lies, into partitioned Parquet: beside its
    files (``_scores-<job id>/`` in their directory) or under MSVMAV_OUTPUT_ROOT, a location
    the path rules accept (403 otherwise)."""
    if options.output not in (None, "parquet"):
        raise invalid(_body("output"), f"dataset {dataset.id} is a dataset by reference: it is "
                      "scored into partitioned Parquet files; give output=parquet")
    present = list(dataset.encoding.get("input_columns") or [])
    for field, wanted in (("id_column", [options.id_column]),
                          ("passthrough", options.passthrough or [])):
        lacking = [c for c in wanted if c and c not in present]
        if lacking:
            raise invalid(_body(field), f"no column {lacking[0]!r} in dataset {dataset.id}; it "
                          f"has {preview(present)}")
    assert dataset.reference is not None
    loc = _body("dataset_id")
    if settings.output_root:
        roots = locations.roots_of([settings.output_root])
        base = locations.check(f"{settings.output_root.rstrip('/')}/dataset-{dataset.id}",
                               roots, loc, "MSVMAV_OUTPUT_ROOT")
    else:
        roots = locations.roots_of(settings.data_roots)
        base = locations.check(_folder([f["path"] for f in dataset.reference.files]), roots,
                               loc)
    if base.local and not locations.resolved_under(base.path, roots):
        raise locations.forbidden(f"{base.path!r} resolves outside the configured roots", loc)
    return {"source": "reference", "dataset_id": dataset.id, "format": "parquet",
            "output_base": base.url}


def _folder(paths: list[str]) -> str:
    """The deepest directory holding every file (local paths or URLs of one scheme)."""
    scheme, _, _ = paths[0].rpartition("://")
    prefix = f"{scheme}://" if scheme else ""
    dirs = [p.split("://", 1)[-1].rsplit("/", 1)[0] for p in paths]
    return prefix + os.path.commonpath(dirs)


def submit(session: Session, options: BatchOptions, file: IO[bytes] | None, filename: str,
           settings: Settings) -> Job:
    """Queue a ``batch_predict`` job after every check that needs no scoring; the uploaded
    file is stored with the job (in the caller's transaction)."""
    store.expire(session, settings.batch_result_hours)
    if (file is None) == (options.dataset_id is None):
        raise invalid(_body("file"), "give exactly one of file (an upload) and dataset_id")
    known = list(dict.fromkeys([*INPUT_FORMATS, "svmlight"]))
    if options.format is not None and options.format not in known:
        raise invalid(_body("format"), f"unknown format {options.format!r}; one of "
                      f"{', '.join(known)}")
    model, reference, target = _model(session, options)
    encoder = Encoder.from_dict(model.encoding)
    size = 0
    if file is not None:
        size = _file_size(file, settings)
        source = {"source": "upload", "filename": filename, "size": size,
                  **_file_layout(file, filename, options, encoder)}
    else:
        source = _dataset_source(session, options, model, settings)
    loaded = acquire(runtime_of(session), Target(model.id, stamp=target.stamp), 0.0, None,
                     session=session).model
    passthrough = list(options.passthrough or [])
    columns = output_columns(loaded, options.id_column, passthrough)
    clash = sorted({c for c in columns if columns.count(c) > 1})
    if clash:
        raise invalid(_body("passthrough"), f"column {clash[0]!r} would appear twice in the "
                      "output; leave it out of passthrough (or rename it)")
    params = BatchJob(model_id=model.id, model=reference, id_column=options.id_column,
                      passthrough=passthrough, on_error=options.on_error, stored="parquet",
                      output=options.output or (
                          "parquet" if source["source"] == "reference" else "csv"),
                      chunk_rows=options.chunk_rows or settings.batch_chunk_rows,
                      columns=columns, decision_rule=decision_for(
                          loaded, target, options.rule, options.threshold, ["body"]).as_json(
                          class_values(loaded)), **source).model_dump(mode="json")
    job = jobs.enqueue(session, kind=store.BATCH_KIND, params=params,
                       dataset_id=source.get("dataset_id"))
    if file is not None:
        store.write_input(session, job.id, file)
    return job


def file_digest(file: IO[bytes]) -> str:
    """The upload's SHA-256 (what "the same request" means for an Idempotency-Key)."""
    digest = hashlib.sha256()
    file.seek(0)
    while block := file.read(1024 * 1024):
        digest.update(block)
    file.seek(0)
    return digest.hexdigest()


def _file_size(file: IO[bytes], settings: Settings) -> int:
    file.seek(0, io.SEEK_END)
    size = file.tell()
    file.seek(0)
    if size > settings.batch_max_upload_bytes:
        raise too_large(f"file is {size} bytes; the limit is {settings.batch_max_upload_bytes} "
                        "(MSVMAV_BATCH_MAX_UPLOAD_BYTES)", field="file")
    head = file.read(_SNIFF_BYTES)
    file.seek(0)
    if not head.strip():
        raise invalid(_body("file"), "the uploaded file is empty")
    return size


def finished_job(session: Session, job_id: int, settings: Settings) -> Job:
    """The ended batch job whose files are still kept: one that succeeded, or one that failed
    after scoring some rows (its result holds them). 404 for no such batch job, 409 while it
    runs, was cancelled or failed before any file was stored, 410 once its files expired (the
    next submission deletes them)."""
    job = session.get(Job, job_id)
    if job is None or job.kind != store.BATCH_KIND:  # (the id is a batch job's id)
        raise missing(f"batch job {job_id} not found")
    if job.params.get("source") == "reference" and job.status == "succeeded":
        where = (job.result or {}).get("output_uri")
        raise conflict(f"batch job {job_id} scored a dataset by reference: its result is the "
                       f"partitioned Parquet it wrote to {where} (the job's result lists the "
                       "parts)")
    if job.status not in ("succeeded", "failed") or (
            job.status == "failed" and not store.has_output(session, job_id)):
        raise conflict(f"batch job {job_id} is {job.status}; its result exists once it "
                       "succeeded (or failed after scoring rows)")
    assert job.finished_at is not None
    if job.finished_at + timedelta(hours=settings.batch_result_hours) < utcnow():
        raise Problem(410, f"batch job {job_id}'s files expired (kept "
                      f"{settings.batch_result_hours:g} hours: MSVMAV_BATCH_RESULT_HOURS)",
                      title="Gone")
    return job


def download_format(job: Job, wanted: str | None) -> str:
    """The result's format: ``wanted`` (``?format=``), else the job's ``output``; 409 for a
    job whose result was stored as CSV (queued before the choice existed) in another."""
    params = BatchJob.model_validate(job.params)
    fmt = wanted or params.output
    if params.stored is None and fmt != params.output:
        raise conflict(f"batch job {job.id}'s result was stored as {params.output}: download "
                       f"it as {params.output}")
    return fmt


def result_stream(engine: Engine, job: Job, fmt: str) -> Iterator[bytes]:
    """The result file in ``fmt``: CSV (a header line, then each chunk's lines), JSON Lines
    (an object a row) or Parquet (each chunk's table written as row groups of one file), one
    chunk in memory at a time. A part deleted while it is read (the files expired) raises
    ``store.PartsGoneError``: the response is cut short visibly, never ended as if whole."""
    params = BatchJob.model_validate(job.params)
    parts = store.parts(engine, job.id, store.OUTPUT)
    header = (",".join(_csv_cell(c) for c in params.columns) + "\n").encode()
    if params.stored is None:  # stored as the output format itself
        if fmt == "csv":
            yield header
            yield from parts
        else:
            yield from _parquet_stream((parquet.read(io.BytesIO(p)) for p in parts), None)
        return
    tables = (parquet.read(io.BytesIO(p)) for p in parts)
    if fmt == "parquet":
        schema = _unified_schema(engine, job) if params.format == "jsonl" else None
        yield from _parquet_stream(tables, schema)
        return
    if fmt == "csv":
        yield header
    for table in tables:
        for batch in table.to_batches(max_chunksize=_ROWS_A_PIECE):
            yield (_csv_lines(batch) if fmt == "csv" else _json_lines(batch))


_ROWS_A_PIECE = 8192


def _csv_lines(batch: pa.RecordBatch) -> bytes:
    return batch.to_pandas().to_csv(index=False, header=False).encode()


def _json_lines(batch: pa.RecordBatch) -> bytes:
    return "".join(json.dumps(row, default=str) + "\n" for row in batch.to_pylist()).encode()


def _unified_schema(engine: Engine, job: Job) -> pa.Schema:
    """One schema for every part (JSON Lines' id and pass-through columns are typed chunk by
    chunk): numbers widened, a column whose chunks disagree otherwise as text."""
    schemas = [parquet.schema(io.BytesIO(p)) for p in store.parts(engine, job.id, store.OUTPUT)]
    fields = []
    for name in schemas[0].names if schemas else []:
        types = [s.field(name).type for s in schemas]
        try:
            fields.append(pa.unify_schemas([pa.schema([(name, t)]) for t in types],
                                           promote_options="permissive").field(name))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            fields.append(pa.field(name, pa.string()))
    return pa.schema(fields)


def _csv_cell(name: str) -> str:
    return '"' + name.replace('"', '""') + '"' if any(c in name for c in ',"\n\r') else name


class _Sink(io.RawIOBase):
    """Bytes written by a Parquet writer, taken out as they come."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.buffer += data
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


def _parquet_stream(tables: Iterator[pa.Table], schema: pa.Schema | None) -> Iterator[bytes]:
    """The tables as one Parquet file, in the first table's schema (or ``schema``)."""
    sink = _Sink()
    writer = None
    for table in tables:
        if writer is None:
            schema = schema or table.schema.remove_metadata()
            writer = parquet.writer(sink, schema)
        assert schema is not None
        writer.write_table(table.cast(schema) if table.schema != schema else table)
        yield sink.take()
    if writer is not None:
        writer.close()
        yield sink.take()


def errors_stream(engine: Engine, job: Job) -> Iterator[bytes]:
    """The errors file: CSV ``row,line,column,reason``, every bad row of the job."""
    yield b"row,line,column,reason\n"
    yield from store.parts(engine, job.id, store.ERRORS)




def rows_read(session: Session, job_id: int) -> int:
    """The data rows a job's stored chunks read (scored and bad): where a failed job stopped."""
    return store.stored_rows(session, job_id)[1]
