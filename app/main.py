"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Security
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from app.auth.gate import AuthGate
from app.auth.keys import Scope
from app.auth.routes import router as keys_router
from app.auth.security import AUTH_RESPONSES, AuthMiddleware, require, require_by_method
from app.core import problems
from app.core.config import Settings, get_settings
from app.core.db import (
    api_limits,
    is_sqlite,
    make_engine,
    make_session_factory,
    read_only,
    script_heads,
)
from app.core.error_examples import error_example, needed_scope
from app.core.ids import check_ids
from app.core.metrics import RequestMetrics
from app.core.middleware import BodySizeLimitMiddleware, RequestContextMiddleware
from app.datasets.routes import router as datasets_router
from app.experiments.routes import router as experiments_router
from app.jobs.routes import router as jobs_router
from app.models.routes import router as models_router
from app.operations.routes import metrics_router
from app.operations.routes import router as health_router
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
    {
        "name": "keys",
        "description": "API keys (scope admin): create (the secret is shown once), list, revoke",
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

**API keys**: once keys are in use, send `Authorization: Bearer <key>` (Swagger UI: *Authorize*).
Scopes: `read` — GETs and `POST /predict`, `/predict/file`; `write` — also uploads, training,
experiments, cancel and delete; `admin` — also `/keys`. `/livez`, `/readyz` and these docs are
open. Missing or wrong key: 401; scope too low: 403.
"""


# Swagger UI: fold the schemas list and show each operation's request duration.
# Swagger UI, ReDoc and fastapi-offline's mount for their assets.
DOCS_URL, REDOC_URL, STATIC_DOCS_URL = "/docs", "/redoc", "/static-offline-docs"

# persistAuthorization: the key given to Authorize survives a page reload.
SWAGGER_UI_PARAMETERS = {
    "defaultModelsExpandDepth": 0,
    "displayRequestDuration": True,
    "persistAuthorization": True,
}


def operation_id(route: APIRoute) -> str:
    """Stable operation ids: the handler's name (``create_dataset``, ``get_job``, ...)."""
    return route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = make_engine(settings.database_url, api_limits(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        app.state.auth.close()  # the last keys' last_used_at, before the pool goes
        engine.dispose()

    # Swagger UI (/docs) and ReDoc (/redoc) with their scripts and styles served by the service
    # itself from fastapi-offline's package data (under /static-offline-docs), not from a CDN:
    # the pages work on hosts without internet access.
    app = FastAPIOffline(
        title="msvmav",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        generate_unique_id_function=operation_id,
        lifespan=lifespan,
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        docs_url=DOCS_URL,
        redoc_url=REDOC_URL,
        static_url=STATIC_DOCS_URL,
        dependencies=[Depends(check_ids)],
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.read_session_factory = make_session_factory(read_only(engine))  # GET, HEAD
    app.state.local_database = is_sqlite(settings.database_url)  # no network round trips
    app.state.migration_heads = script_heads(settings.database_url)
    app.state.metrics = RequestMetrics()
    app.state.auth = AuthGate(settings, engine)

    problems.install(app)
    app.add_middleware(
        BodySizeLimitMiddleware,
        upload_limit=settings.max_upload_bytes + MULTIPART_SLACK_BYTES,
        json_limit=settings.max_json_bytes,
    )
    app.add_middleware(AuthMiddleware, gate=app.state.auth, open_paths=open_paths(app))
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)

    # The scope each router needs, in one place (see app.auth.security); the health probes
    # (and the docs) are open.
    read, by_method = [Security(require(Scope.read))], [Security(require_by_method)]
    # Routes are matched in the order they are included: /predict, the hot path, first.
    for router, dependencies in (
        (predict_router, read),
        (datasets_router, by_method),
        (jobs_router, by_method),
        (models_router, by_method),
        (experiments_router, by_method),
        (keys_router, [Security(require(Scope.admin))]),
        (metrics_router, read),
    ):
        app.include_router(router, dependencies=dependencies, responses=AUTH_RESPONSES)
    app.include_router(health_router)

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def open_paths(app: FastAPI) -> set[str]:
    """Paths served without a key: the health probes and the API documentation with its
    scripts and styles (``/static-offline-docs/...``, fastapi-offline's mount)."""
    # fastapi-offline serves /docs and /redoc itself (the app's docs_url/redoc_url are None).
    docs = (app.openapi_url, DOCS_URL, REDOC_URL, app.swagger_ui_oauth2_redirect_url)
    return {"/livez", "/readyz", STATIC_DOCS_URL + "/", *(p for p in docs if p)}


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
    for path, path_item in schema.get("paths", {}).items():
        for method, op in path_item.items():
            if needed_scope(method.upper(), path) == "read":
                op.get("responses", {}).pop("403", None)  # every key has at least read
            if "requestBody" in op:  # any body can be malformed or over its size limit
                responses = op.setdefault("responses", {})
                for code, description in BODY_ERRORS.items():
                    responses.setdefault(code, {"description": description})
            for code, response in op.get("responses", {}).items():
                if not code.isdigit() or int(code) < 400:
                    continue
                response["content"] = {
                    problems.PROBLEM_MEDIA_TYPE: {
                        "schema": problem_ref,
                        "example": error_example(int(code), path, op, method.upper()),
                    }
                }
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
