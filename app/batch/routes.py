"""/batch-predictions: queue a batch scoring job; download its result and errors as streams."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, File, Form, Query, Request, UploadFile, status
from fastapi.responses import JSONResponse, StreamingResponse

from app.batch import service
from app.batch.schemas import DownloadFormat
from app.core.deps import SessionDep, SettingsDep
from app.core.forms import KNOWN_FORM_FIELDS
from app.core.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.core.ids import MAX_DB_ID
from app.core.problems import invalid, problem_responses
from app.core.validation import Text
from app.jobs.schemas import JobOut
from app.registry.canary import ROUTE_KEY_HEADER

router = APIRouter(prefix="/batch-predictions", tags=["batch"])

_MEDIA = {"csv": "text/csv", "parquet": "application/vnd.apache.parquet",
          "jsonl": "application/x-ndjson"}


def _columns(values: list[str] | None) -> list[str] | None:
    out = [part.strip() for v in values or [] for part in v.split(",") if part.strip()]
    return out or None


@router.post(
    "",
    dependencies=[KNOWN_FORM_FIELDS],
    status_code=status.HTTP_202_ACCEPTED,
    summary="Start a batch scoring job",
    description=(
        "Scores a file (`file`: CSV, TSV, whitespace-separated text, dense ARFF, Parquet or "
        "JSON Lines; svmlight for a model trained on svmlight) or "
        "a stored dataset (`dataset_id`) with a model, in a job: a worker reads, scores and "
        "writes `chunk_rows` rows at a time. The result (`output`: csv or parquet, the default "
        "download format; a dataset by reference is scored into Parquet) holds the "
        "id column (`id_column`, or `row`, the 0-based row number), `label`, the decision "
        "value(s), the probabilities when the model has them, and the `passthrough` columns. "
        "`on_error=skip` leaves rows that cannot be scored out and lists them (row, line, "
        "column, reason), a line that is not a row at all (a field too many, not a JSON "
        "object, ...) as one bad row: the first in the job's result, all in the errors file. "
        "A job that fails keeps the rows it scored before it stopped. "
        "Answers 202 with `Location: /jobs/{id}`; then GET /batch-predictions/{id}/result."
    ),
    response_model=JobOut,
    responses={
        202: {"description": "Job queued", "headers": {
            "Location": {"description": "/jobs/{id}", "schema": {"type": "string"}},
            **REPLAYED_RESPONSE_HEADER}},
        **problem_responses(404, 413, 422),
    },
)
def create_batch_job(
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    file: Annotated[UploadFile | None, File(description="The rows to score")] = None,
    dataset_id: Annotated[int | None, Form(ge=1, le=MAX_DB_ID, description="Or a stored "
                                           "dataset to score", examples=[""])] = None,
    model_id: Annotated[int | None, Form(ge=1, le=MAX_DB_ID, description="Stored model to "
                                         "use (or give `model`)", examples=[1])] = None,
    model: Annotated[Text | None, Form(max_length=300, description="Registered model: "
                                       "`name@alias`, `name/version` or `name`",
                                       examples=[""])] = None,
    format: Annotated[Literal["csv", "tsv", "whitespace", "parquet", "jsonl", "arff",
                              "svmlight"] | None, Form(
        description="The file's format (default: from its name, then its first bytes)",
        examples=[""])] = None,
    delimiter: Annotated[Text | None, Form(description="Text: the field delimiter; "
                                           "`whitespace` for runs of spaces and tabs",
                                           examples=[""])] = None,
    header: Annotated[bool | None, Form(description="Text: the first line is a header "
                                        "(default: unless it is all numbers)",
                                        examples=[""])] = None,
    id_column: Annotated[Text | None, Form(description="Input column copied as each row's id "
                                           "(default: `row`, the row number)",
                                           examples=[""])] = None,
    passthrough: Annotated[list[Text] | None, Form(description="Input columns copied to the "
                                                   "output, comma-separated or repeated",
                                                   examples=[[]])] = None,
    output: Annotated[Literal["csv", "parquet"] | None, Form(
        description="The result's default download format (default csv; parquet for a "
        "dataset by reference)", examples=["csv"])] = None,
    on_error: Annotated[Literal["fail", "skip"], Form(
        description="A row that cannot be scored fails the job (fail) or is left out and "
        "listed (skip)", examples=["fail"])] = "fail",
    chunk_rows: Annotated[int | None, Form(gt=0, le=1_000_000, description="Rows per chunk "
                                           "(default MSVMAV_BATCH_CHUNK_ROWS)",
                                           examples=[""])] = None,
    rule: Annotated[Literal["argmax"] | None, Form(
        description="This job's decision rule instead of the reference's stored one: "
        "`argmax` of the probabilities", examples=[""])] = None,
    threshold: Annotated[float | None, Form(
        ge=0, le=1, allow_inf_nan=False, description="This job's decision rule instead of the "
        "stored one: classes[1] when its probability is at least `threshold` (a calibrated "
        "two-class model)", examples=[""])] = None,
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    if file is not None and len(file.filename or "") > 255:
        raise invalid(["body", "file"], "file name longer than 255 characters")
    options = service.BatchOptions(
        model_id=model_id, model=(model or "").strip() or None, dataset_id=dataset_id,
        format=format, delimiter=delimiter or None, header=header,
        id_column=(id_column or "").strip() or None, passthrough=_columns(passthrough),
        output=output, on_error=on_error, chunk_rows=chunk_rows, rule=rule,
        threshold=threshold, max_columns=settings.max_features,
        route_key=request.headers.get(ROUTE_KEY_HEADER))
    filename = file.filename or "" if file is not None else ""

    def create() -> Created:
        job = service.submit(session, options, file.file if file else None, filename, settings)
        body = JobOut.model_validate(job).model_dump(mode="json")
        return Created(status.HTTP_202_ACCEPTED, body, f"/jobs/{job.id}")

    payload = {"options": {k: v for k, v in options.__dict__.items() if k != "max_columns"},
               "filename": filename,
               "file": service.file_digest(file.file) if file else None}
    return create_once(session, request, idempotency_key, payload, create)


@router.get(
    "/{batch_id}/result",
    summary="Download a batch job's result",
    description=(
        "The scored rows as CSV, Parquet or JSON Lines (`format`; default the job's "
        "`output`), streamed. A failed job's result holds the rows it scored before it "
        "stopped (`X-Batch-Status: failed`; `X-Batch-Rows-Read`: the data rows read, scored "
        "or bad). 409 while the job runs; 410 once it is older than "
        "MSVMAV_BATCH_RESULT_HOURS. A download whose files expire while it is read is cut "
        "off (the connection closed mid-body), never ended as if complete."
    ),
    response_class=StreamingResponse,
    responses={200: {"content": {
        "text/csv": {"schema": {"type": "string"},
                     "example": "row,label,decision_value,y\n0,no,-0.4454,no\n1,no,-0.3697,no\n"},
        "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
        "application/x-ndjson": {
            "schema": {"type": "string"},
            "example": ('{"row": 0, "label": "no", "decision_value": -0.4454, "y": "no"}\n'
                        '{"row": 1, "label": "no", "decision_value": -0.3697, "y": "no"}\n')}}},
               **problem_responses(404, 409, 410)},
)
def get_result(session: SessionDep, settings: SettingsDep, request: Request, batch_id: int,
               format: Annotated[DownloadFormat | None, Query(
                   description="csv, parquet or jsonl (default: the job's `output`)")] = None,
               ) -> StreamingResponse:
    job = service.finished_job(session, batch_id, settings)
    fmt = service.download_format(job, format)
    name = f"batch-{batch_id}.{fmt}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"',
               "X-Batch-Status": job.status}
    if job.status == "failed":
        headers["X-Batch-Rows-Read"] = str(service.rows_read(session, batch_id))
    session.rollback()  # the stream reads on its own connections
    return StreamingResponse(
        service.result_stream(request.app.state.engine, job, fmt), media_type=_MEDIA[fmt],
        headers=headers)


@router.get(
    "/{batch_id}/errors",
    summary="Download a batch job's bad rows",
    description="Every row left out (`on_error=skip`) as CSV: row, line, column, reason.",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {
        "schema": {"type": "string"},
        "example": "row,line,column,reason\n2,4,balance,'lots' is not a number\n"}}},
               **problem_responses(404, 409, 410)},
)
def get_errors(session: SessionDep, settings: SettingsDep, request: Request, batch_id: int
               ) -> StreamingResponse:
    job = service.finished_job(session, batch_id, settings)
    session.rollback()
    return StreamingResponse(
        service.errors_stream(request.app.state.engine, job), media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="batch-{batch_id}-errors.csv"'})
