"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from app import problems
from app.config import Settings, get_settings
from app.datasets.routes import router as datasets_router
from app.db import make_engine, make_session_factory, script_heads
from app.experiments.routes import router as experiments_router
from app.health import router as health_router
from app.ids import check_ids
from app.jobs.routes import router as jobs_router
from app.metrics import RequestMetrics
from app.middleware import BodySizeLimitMiddleware, RequestContextMiddleware
from app.models.routes import router as models_router
from app.predict.routes import router as predict_router

# Multipart framing and form fields on top of the file itself.
MULTIPART_SLACK_BYTES = 1024 * 1024
# Documented on every operation with a request body.
BODY_ERRORS = {
    "400": "Malformed body: not parseable as JSON or as multipart/form-data",
    "413": "Body larger than MSVMAV_MAX_JSON_BYTES (JSON) or MSVMAV_MAX_UPLOAD_BYTES (upload)",
    "422": "Invalid input: the `errors` list names each field (and row/column of a file)",
}

TAGS = [
    {"name": "datasets", "description": "Upload and manage tabular datasets"},
    {
        "name": "jobs",
        "description": "Start training jobs (any algorithm, optionally with a cross-validated "
        "search) and follow or cancel them",
    },
    {"name": "models", "description": "Trained models, their weights and margin statistics"},
    {"name": "predict", "description": "Labels and decision values for new rows"},
    {
        "name": "experiments",
        "description": "The paper's protocol (Table 1, Figure 1) over stored data sets and "
        "several algorithms, as background jobs",
    },
    {"name": "operations", "description": "Health and metrics"},
]

DESCRIPTION = """
Margin-distribution learning with **MSVMAv** (IJCAI 2022) and the paper's comparators
(SVM, SVR, LSSVM, MAMC, ODM, FMM).

1. `POST /datasets` — upload a CSV/TSV, LIBSVM or ARFF file;
2. `POST /train` — queue a training job (202, `Location: /jobs/{id}`): any `algorithm`, its
   `params`, optionally a cross-validated `search`;
3. `GET /jobs/{id}` — poll until `succeeded`, then read `model_id`;
4. `POST /predict` — labels and decision values; `GET /models/{id}/margins` — margin statistics
   (`/margins.png`, `/margins.svg` — their cumulative distribution);
5. `POST /experiments` — the paper's protocol over data sets and algorithms; then
   `GET /experiments/{id}/table.md|table.csv|margins.png|margins.svg`.

Errors are RFC 9457 `application/problem+json`.
"""


def operation_id(route: APIRoute) -> str:
    """Stable operation ids: the handler's name (``create_dataset``, ``get_job``, ...)."""
    return route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = FastAPI(
        title="msvmav",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        generate_unique_id_function=operation_id,
        lifespan=lifespan,
        dependencies=[Depends(check_ids)],
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.migration_heads = script_heads(settings.database_url)
    app.state.metrics = RequestMetrics()

    problems.install(app)
    app.add_middleware(
        BodySizeLimitMiddleware,
        upload_limit=settings.max_upload_bytes + MULTIPART_SLACK_BYTES,
        json_limit=settings.max_json_bytes,
    )
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)

    for router in (
        datasets_router,
        jobs_router,
        models_router,
        predict_router,
        experiments_router,
        health_router,
    ):
        app.include_router(router)

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """OpenAPI with error answers documented as problem+json instead of FastAPI's default
    ``HTTPValidationError``."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    problem_ref = {"$ref": "#/components/schemas/ProblemDetail"}
    for path_item in schema.get("paths", {}).values():
        for op in path_item.values():
            if "requestBody" in op:  # any body can be malformed or over its size limit
                responses = op.setdefault("responses", {})
                for code, description in BODY_ERRORS.items():
                    responses.setdefault(code, {"description": description})
            for code, response in op.get("responses", {}).items():
                if not code.isdigit() or int(code) < 400:
                    continue
                response["content"] = {problems.PROBLEM_MEDIA_TYPE: {"schema": problem_ref}}
                if code == "422":
                    response["description"] = (
                        "Invalid input: the `errors` list names each field "
                        "(and row/column of a file)"
                    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    if "ProblemDetail" not in components:
        components["ProblemDetail"] = problems.ProblemDetail.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    app.openapi_schema = schema
    return schema
