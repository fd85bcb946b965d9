"""/models/{id}/export and /models/import: a model leaves one service and enters another."""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from fastapi import APIRouter, File, Query, Request, Response, UploadFile, status
from fastapi.responses import JSONResponse

from app.core.deps import SessionDep, SettingsDep
from app.core.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.core.problems import problem_responses
from app.export import service
from app.models.schemas import ModelDetail
from app.registry.references import BARE_NAME

router = APIRouter(tags=["models"])  # under /models (app.routers.MODEL_PARTS)

MEDIA_TYPES = {"onnx": "application/octet-stream", "bundle": "application/zip"}
SUFFIXES = {"onnx": "onnx", "bundle": "zip"}


@router.get(
    "/{model_ref:path}/export",
    summary="Export a model",
    description=(
        "`{model_ref}`: a stored model's id or a registry reference (`name@alias`, "
        "`name/version`, `name`: " + BARE_NAME + "). "
        "`format=onnx`: one ONNX graph (opset 19, core operators in double precision) from raw "
        "features to `label` and `decision`, with the one-hot encoding and the min-max scaling "
        "and its clip to [0, 1] inside; `format=bundle`: a zip of JSON and npy members "
        "(encoding, scaling, estimator with its support vectors / dual coefficients, metadata, "
        "sha256 checksums) for `POST /models/import` or `app.export.bundle.load_bundle`. Both "
        "label by the decision rule of the reference, as /predict does: an alias's rule, else "
        "the model's (the graph's `msvmav.decision_rule` metadata, the bundle's "
        "`decision_rule`). See docs/export.md. 409 for an alias with a canary (a file answers "
        "by one version): export `name/version` of either arm, or end the canary."
    ),
    response_class=Response,
    responses={
        200: {
            "description": "The file (Content-Disposition: attachment)",
            "content": {
                t: {"schema": {"type": "string", "format": "binary"}}
                for t in sorted(set(MEDIA_TYPES.values()))
            },
        },
        **problem_responses(404, 409, 422, 501),
    },
)
def export_model(
    session: SessionDep,
    model_ref: str,
    format: Annotated[
        Literal["onnx", "bundle"], Query(description="`bundle` or `onnx`", examples=["onnx"])
    ] = "bundle",
) -> Response:
    make = service.export_onnx if format == "onnx" else service.export_bundle
    model_id, content = make(session, model_ref)
    filename = f"msvmav-model-{model_id}.{SUFFIXES[format]}"
    return Response(
        content,
        media_type=MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    summary="Import a model bundle",
    description=(
        "Multipart upload (field `file`) of a bundle from `GET /models/{id}/export?format=bundle`"
        " of this or another msvmav service: stored as a new model (`dataset_id` and `job_id` "
        "null) that predicts as the exported one did. A bundle that is truncated, tampered with "
        "(checksum mismatch), of a newer format version or holding a pickle is refused with 422 "
        "naming the problem, and nothing is stored."
    ),
    response_model=ModelDetail,
    responses={
        201: {
            "description": "Model stored",
            "headers": {
                "Location": {"description": "/models/{id}", "schema": {"type": "string"}},
                **REPLAYED_RESPONSE_HEADER,
            },
        },
        **problem_responses(413, 422),
    },
)
def import_model(
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    file: Annotated[
        UploadFile, File(description="The bundle (.zip)", examples=["msvmav-model-1.zip"])
    ],
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    content = file.file.read()

    def create() -> Created:
        row = service.import_bundle(session, content, settings.max_upload_bytes)
        body = ModelDetail.from_row(row).model_dump(mode="json")
        return Created(status.HTTP_201_CREATED, body, f"/models/{row.id}")

    # "The same request": the same bundle bytes.
    payload = {"file_sha256": hashlib.sha256(content).hexdigest()}
    return create_once(session, request, idempotency_key, payload, create)
