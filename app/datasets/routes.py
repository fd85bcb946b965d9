"""/datasets routes: thin wrappers over app.datasets.service."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, File, Form, Request, Response, UploadFile, status
from fastapi.responses import JSONResponse

from app.core.deps import SessionDep, SettingsDep
from app.core.forms import KNOWN_FORM_FIELDS
from app.core.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.core.pagination import PageDep
from app.core.problems import invalid, problem_responses
from app.core.validation import Text, check_text
from app.datasets import profile, reference, service
from app.datasets.schemas import (
    MAX_NAME_LENGTH,
    DatasetDetail,
    DatasetPage,
    DatasetProfile,
    DatasetReferenceIn,
    DatasetSummary,
)

router = APIRouter(prefix="/datasets", tags=["datasets"])


def _drop(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out = [part.strip() for v in values for part in v.split(",") if part.strip()]
    return out or None


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    dependencies=[KNOWN_FORM_FIELDS],
    summary="Upload a dataset",
    description=(
        "Multipart upload of a CSV/TSV, LIBSVM/svmlight, ARFF, Parquet or JSON Lines file "
        "(field `file`; the one format registry, docs/ingest.md). The file "
        "is parsed, encoded to a numeric matrix and stored with its label column. "
        "Parsing errors answer 422 naming the option, row and column at fault."
    ),
    response_model=DatasetDetail,
    responses={
        201: {
            "description": "Dataset stored",
            "headers": {
                "Location": {"description": "/datasets/{id}", "schema": {"type": "string"}},
                **REPLAYED_RESPONSE_HEADER,
            },
        },
        **problem_responses(413, 422),
    },
)
# Swagger UI pre-fills a form field that has no example with a sample value ("string", 1, true)
# and sends it, which breaks a plain upload; the empty examples leave the options empty (unsent).
def create_dataset(
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    file: Annotated[UploadFile, File(description="The data file")],
    name: Annotated[
        Text | None,
        Form(
            max_length=MAX_NAME_LENGTH,
            description="Display name (default: file name)",
            examples=[""],
        ),
    ] = None,
    format: Annotated[
        Text | None,
        Form(
            description="csv, tsv, whitespace, svmlight (libsvm), arff, parquet or jsonl; "
            "detected from name/content if absent",
            examples=[""],
        ),
    ] = None,
    label: Annotated[
        Text | None,
        Form(
            description="Label column: a name, or a 0-based index given as digits "
            "(default: the format's convention, e.g. last column / first LIBSVM field)",
            examples=[""],
        ),
    ] = None,
    drop: Annotated[
        list[Text] | None,
        Form(
            description="Columns to ignore: names or fnmatch globs, comma-separated or repeated",
            examples=[[]],
        ),
    ] = None,
    missing: Annotated[
        Literal["error", "drop", "mean", "median", "most_frequent", "constant"],
        Form(
            description="Missing values: reject the file (error), drop those rows (drop), or "
            "keep them and impute them per column with fills fitted on each training part "
            "(mean, median, most_frequent, constant; see docs/ingest.md)",
            examples=["error"],
        ),
    ] = "error",
    fill_value: Annotated[
        Text | None,
        Form(
            description="missing=constant: the fill (a number for numeric columns; default 0 "
            "for numeric, 'missing_value' for categorical columns)",
            examples=[""],
        ),
    ] = None,
    n_features: Annotated[
        int | None,
        Form(
            ge=1,
            description="LIBSVM: number of features (when the file's max index is less)",
            examples=[""],
        ),
    ] = None,
    header: Annotated[
        bool | None,
        Form(description="CSV/TSV: first line is a header (default: sniffed)", examples=[""]),
    ] = None,
    delimiter: Annotated[
        Text | None,
        Form(
            description="CSV: field delimiter (default: sniffed); `\\t` or `tab` for tabs, "
            "`whitespace` (or a space) for runs of spaces and tabs",
            examples=[""],
        ),
    ] = None,
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    if len(file.filename or "") > MAX_NAME_LENGTH:
        raise invalid(["body", "file"], f"file name longer than {MAX_NAME_LENGTH} characters")
    check_text(["body", "file"], file.filename)
    info = service.inspect_upload(file.file)  # one pass: size, digest; the file stays spooled
    options = service.UploadOptions(
        name=name,
        format=format or None,
        label=(label or "").strip() or None,
        drop=_drop(drop),
        missing=missing,
        fill_value=fill_value or None,
        n_features=n_features,
        header=header,
        delimiter=delimiter or None,
    )
    filename = file.filename or ""

    def create() -> Created:
        dataset = service.create(
            session,
            file=file.file,
            filename=filename,
            options=options,
            settings=settings,
            info=info,
        )
        body = DatasetDetail.model_validate(dataset).model_dump(mode="json")
        return Created(status.HTTP_201_CREATED, body, f"/datasets/{dataset.id}")

    # "The same request": the same file bytes, file name and options (not the multipart
    # boundary, which differs on every send).
    payload = {
        "file_sha256": info.sha256,
        "filename": filename,
        "options": asdict(options),
    }
    return create_once(session, request, idempotency_key, payload, create)


_REFERENCE_EXAMPLES = {
    "directory": {
        "summary": "A directory of Parquet files",
        "value": {"name": "clicks", "uri": "/srv/msvmav-data/clicks/", "label": "clicked",
                  "drop": ["session_id"]},
    },
    "s3": {
        "summary": "A glob under an S3 prefix",
        "value": {"uri": "s3://team-data/clicks/2026-11-*.parquet", "label": "clicked"},
    },
}


@router.post(
    "/references",
    status_code=status.HTTP_201_CREATED,
    summary="Register a Parquet dataset by reference",
    description=(
        "Registers Parquet files (a directory, a file or a glob; a local path or an fsspec "
        "URL such as `s3://bucket/prefix/`) as a dataset without copying its rows: the service "
        "reads the schema and a first pass (rows, label classes, categories, min/max) — on the "
        "Dask cluster when MSVMAV_DASK_SCHEDULER is set — and stores the metadata, encoding "
        "and reference. Jobs (train, batch scoring) read the files where they lie. Only "
        "locations under MSVMAV_DATA_ROOTS are accepted: anything else (another path, `..`, "
        "a symbolic link out of a root, another host) answers 403 naming the rule; 403 too "
        "when MSVMAV_DATA_ROOTS is unset."
    ),
    response_model=DatasetDetail,
    responses={
        201: {
            "description": "Dataset registered",
            "headers": {
                "Location": {"description": "/datasets/{id}", "schema": {"type": "string"}},
                **REPLAYED_RESPONSE_HEADER,
            },
        },
        **problem_responses(403, 422),
    },
)
def register_dataset_reference(
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    body: Annotated[DatasetReferenceIn, Body(openapi_examples=_REFERENCE_EXAMPLES)],
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    check_text(["body", "uri"], body.uri)
    options = reference.ReferenceOptions(
        uri=body.uri.strip(), name=body.name or None, label=(body.label or "").strip() or None,
        drop=tuple(d.strip() for d in body.drop if d.strip()),
    )

    def create() -> Created:
        dataset = reference.register(session, options, settings)
        out = DatasetDetail.model_validate(dataset).model_dump(mode="json")
        return Created(status.HTTP_201_CREATED, out, f"/datasets/{dataset.id}")

    return create_once(session, request, idempotency_key, body.model_dump(), create)


@router.get(
    "",
    summary="List datasets",
    description="Newest first, `limit` per page; follow `next_cursor` for the next page.",
    response_model=DatasetPage,
    responses=problem_responses(422),
)
def list_datasets(session: SessionDep, page: PageDep) -> DatasetPage:
    return DatasetPage.of(service.list_page(session, page), DatasetSummary.model_validate)


@router.get(
    "/{dataset_id}",
    summary="Get a dataset",
    response_model=DatasetDetail,
    responses=problem_responses(404),
)
def get_dataset(session: SessionDep, dataset_id: int) -> DatasetDetail:
    return DatasetDetail.model_validate(service.get_or_raise(session, dataset_id))


@router.get(
    "/{dataset_id}/profile",
    summary="Preview and profile a dataset",
    description=(
        "Its first rows as stored (encoded features and labels) and, per column of the file "
        "that became features, its kind, missing values, distinct values, min/max/mean (a "
        "categorical column: its most frequent categories), plus the label's class counts. "
        "Profiled on at most the first 100,000 rows and 200 columns (`rows_profiled`)."
    ),
    response_model=DatasetProfile,
    responses=problem_responses(404),
)
def get_dataset_profile(session: SessionDep, dataset_id: int) -> dict[str, Any]:
    dataset = service.get_or_raise(session, dataset_id)
    if dataset.reference is not None:  # only the files holding the rows profiled are read
        X, y = reference.load_head(dataset, profile.PROFILE_ROWS)
    else:
        X, y = service.load_arrays(session, dataset)
    return profile.profile(dataset, X, y)


@router.delete(
    "/{dataset_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a dataset",
    description="409 while a queued or running job uses it. Trained models are kept.",
    responses=problem_responses(404, 409),
)
def delete_dataset(session: SessionDep, dataset_id: int) -> Response:
    service.delete(session, dataset_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
