"""Open Inference Protocol (KServe V2) routes over REST, so that stock clients
(``tritonclient.http``, KServe's) work with their defaults, binary tensor data included.

``/v2/health/live`` and ``/v2/health/ready`` are open like ``/livez`` and ``/readyz`` (probes
and clients check them without credentials); every other route needs a key of scope ``read``
when keys are in use, like ``/predict``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.problems import Problem, problem_responses
from app.core.validation import rows_and_columns_why
from app.operations.routes import readyz
from app.protocols import v2_service
from app.protocols.errors import v2_error
from app.protocols.tensors import HEADER_LENGTH, ContainerBound, encode_response, parse_request
from app.protocols.v2_schemas import (
    INFER_REQUEST_BODY,
    InferResponse,
    Live,
    ModelMetadata,
    ModelReady,
    Ready,
    ServerMetadata,
)
from app.registry.canary import ROUTE_KEY_HEADER
from app.registry.references import BARE_NAME
from app.serving.lanes import INLINE_BODY_BYTES
from app.serving.target import version_headers

TAG = "inference protocol (V2)"
health_router = APIRouter(prefix="/v2/health", tags=[TAG])
router = APIRouter(prefix="/v2", tags=[TAG])

HEALTH_PATHS = ("/v2/health/live", "/v2/health/ready")
EXTENSIONS = ["binary_tensor_data"]
_MODEL = "/models/{model_name}"
_VERSION = "/models/{model_name}/versions/{model_version}"


@health_router.get("/live", summary="Server live", response_model=Live)
def server_live() -> Live:
    return Live(live=True)


@health_router.get(
    "/ready",
    summary="Server ready (database reachable and migrated, as /readyz)",
    response_model=Ready,
    responses=problem_responses(503),
)
def server_ready(request: Request) -> Ready:
    try:
        readyz(request)
    except Problem as problem:
        raise v2_error(503, problem.detail) from None
    return Ready(ready=True)


@router.get("", summary="Server metadata", response_model=ServerMetadata)
def server_metadata(request: Request) -> ServerMetadata:
    return ServerMetadata(name="msvmav", version=request.app.version, extensions=EXTENSIONS)


def _described(request: Request, name: str, version: str | None) -> v2_service.Described:
    with request.app.state.read_session_factory() as session:
        return v2_service.described(session, name, version)


_MODEL_DOC = (
    f"`{{model_name}}`: `name@alias`, a stored model's id or {BARE_NAME}; "
    "`versions/{model_version}`: that version of the registered model."
)


_METADATA = {
    "summary": "Model metadata",
    "description": _MODEL_DOC,
    "response_model": ModelMetadata,
    "responses": problem_responses(404),
}
_READY = {
    "summary": "Model ready (resolvable and loaded)",
    "description": _MODEL_DOC,
    "response_model": ModelReady,
    "responses": problem_responses(404),
}


@router.get(_MODEL, **_METADATA)
def model_metadata(request: Request, model_name: str) -> dict[str, Any]:
    return v2_service.metadata(_described(request, model_name, None))


@router.get(_VERSION, **_METADATA)
def model_version_metadata(request: Request, model_name: str, model_version: str) -> dict[str, Any]:
    return v2_service.metadata(_described(request, model_name, model_version))


@router.get(_MODEL + "/ready", **_READY)
def model_ready(request: Request, model_name: str) -> ModelReady:
    return ModelReady(name=_described(request, model_name, None).name, ready=True)


@router.get(_VERSION + "/ready", **_READY)
def model_version_ready(request: Request, model_name: str, model_version: str) -> ModelReady:
    return ModelReady(name=_described(request, model_name, model_version).name, ready=True)


def _bound(settings: Settings) -> ContainerBound:
    """A tensor per column (its object, shape, parameters, data) or a nested row each."""
    rows, columns = settings.max_predict_instances, settings.max_features
    return ContainerBound(rows + 4 * columns + 16, rows_and_columns_why(rows, columns))


def _response(answer: v2_service.Outputs) -> Response:
    content, header_length = encode_response(*answer)
    head = answer[0]  # the version that answered (an alias's canary: its arm) as headers too
    version = head.get("model_version")
    headers = version_headers(None if version is None else int(version),
                              head["parameters"].get("arm"))
    if header_length is None:
        return Response(content, media_type="application/json", headers=headers)
    return Response(
        content,
        media_type="application/octet-stream",
        headers={HEADER_LENGTH: str(header_length), **headers},
    )


def _infer_sync(
    request: Request, body: bytes, model_name: str, model_version: str | None
) -> Response:
    state = request.app.state
    parsed = parse_request(body, request.headers.get(HEADER_LENGTH), _bound(state.settings))
    return _response(v2_service.infer(state.runtime, model_name, model_version, parsed,
                                      request.headers.get(ROUTE_KEY_HEADER)))


async def _infer(request: Request, model_name: str, model_version: str | None) -> Response:
    """A small body parsed on the loop and served in the lane its rows allow
    (app.serving.lanes); a larger one parsed and served in the pool."""
    body = await request.body()
    if len(body) > INLINE_BODY_BYTES:
        return await run_in_threadpool(_infer_sync, request, body, model_name, model_version)
    state = request.app.state
    parsed = parse_request(body, request.headers.get(HEADER_LENGTH), _bound(state.settings))
    return await v2_service.infer_soon(state.runtime, model_name, model_version, parsed,
                                       _response, request.headers.get(ROUTE_KEY_HEADER))


_INFER = {
    "summary": "Infer",
    "description": _MODEL_DOC + " Inputs: one FP32/FP64/INT32/INT64 tensor `[n, d]` of the raw "
    "features in training column order, or one tensor per column (`[n]` or `[n, 1]`, BYTES "
    "for a categorical column); optionally `ids` (BYTES, INT32 or INT64, `[n]`), the rows' "
    "prediction ids, echoed as the output `id` (BYTES; without them `{X-Request-ID}:{row}`). "
    "Errors carry the protocol's `error` member.",
    "response_class": Response,
    "responses": {
        200: {
            "model": InferResponse,
            "description": "Outputs `label`, `decision` and `id`; with binary outputs, a JSON "
            "header of `Inference-Header-Content-Length` bytes followed by the outputs' binary "
            "data",
            "content": {
                "application/octet-stream": {
                    "schema": {"type": "string", "format": "binary"},
                    "example": '{"model_name":"1","outputs":[{"name":"label","datatype":"INT64",'
                    '"shape":[2],"parameters":{"binary_data_size":16}},...]} followed by the '
                    "outputs' little-endian bytes",
                }
            },
            "headers": {
                HEADER_LENGTH: {
                    "description": "Length of the JSON header when outputs are binary",
                    "schema": {"type": "integer"},
                }
            },
        },
        **problem_responses(400, 404, 413),
    },
    "openapi_extra": {"requestBody": INFER_REQUEST_BODY},
}


@router.post(_MODEL + "/infer", **_INFER)
async def model_infer(request: Request, model_name: str) -> Response:
    return await _infer(request, model_name, None)


@router.post(_VERSION + "/infer", **_INFER)
async def model_version_infer(request: Request, model_name: str, model_version: str) -> Response:
    return await _infer(request, model_name, model_version)
