"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline
from sqlalchemy.exc import SQLAlchemyError

from app.alerts import evaluator as alert_evaluator
from app.alerts.gauges import gauge_lines
from app.apidocs import REDOC_ASSETS_URL, install_redoc
from app.auth.gate import AuthGate
from app.auth.keys import Scope
from app.auth.security import AuthMiddleware, admitted
from app.core import problems, reserve
from app.core.config import Settings, get_settings
from app.core.db import api_limits, make_engine, script_heads
from app.core.ids import check_ids
from app.core.middleware import (
    BodySizeLimitMiddleware,
    RequestContextMiddleware,
    StaticPathMethods,
    relative_slash_redirects,
)
from app.core.query_params import reject_unknown_query
from app.core.request_metrics import RequestMetrics
from app.core.runtime import Runtime
from app.core.validation import check_request
from app.datasets import locations
from app.loop import policies as loop_policies
from app.monitoring import log as prediction_log
from app.monitoring import sinks as monitoring_sinks
from app.openapi import custom_openapi
from app.predict.fast_path import PredictFastPath
from app.routers import OPEN_PATHS, include_routers

# Multipart framing and form fields on top of the file itself.
MULTIPART_SLACK_BYTES = 1024 * 1024
TAGS = [
    {"name": "datasets", "description": "Upload and manage tabular datasets"},
    {
        "name": "jobs",
        "description": "Start training jobs (any algorithm, optionally with a cross-validated "
        "search) and follow or cancel them",
    },
    {
        "name": "models",
        "description": "Trained models, their weights and margin statistics; export (ONNX, "
        "bundle) and import",
    },
    {"name": "predict", "description": "Labels and decision values for new rows"},
    {
        "name": "batch",
        "description": "Batch scoring jobs: a file or a stored dataset scored chunk by chunk, "
        "the result downloaded as CSV or Parquet",
    },
    {
        "name": "monitoring",
        "description": "The prediction log: feedback (true labels by prediction id) and each "
        "model's monitoring report (live decision values against training, drift, accuracy)",
    },
    {
        "name": "registry",
        "description": "Registered models: names, versions 1, 2, 3 …, movable aliases "
        "(`production`, `staging` …) with their history and a one-step rollback",
    },
    {
        "name": "alerts",
        "description": "Alert rules on the monitoring report, evaluated on every window, "
        "delivered to signed webhooks (with registry events); their deliveries",
    },
    {
        "name": "experiments",
        "description": "The paper's protocol (Table 1, Figure 1) over stored data sets and "
        "several algorithms, as background jobs",
    },
    {
        "name": "keys",
        "description": "API keys (scope admin): create (the secret is shown once), list, revoke",
    },
    {
        "name": "inference protocol (V2)",
        "description": "The Open Inference Protocol (KServe V2, Triton's binary tensor data "
        "extension): stock clients such as tritonclient.http",
    },
    {
        "name": "inference protocol (MLflow)",
        "description": "MLflow's scoring protocol: POST /models/{ref}/invocations",
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
5. `POST /registered-models`, `…/versions`, `PUT …/aliases/production` — name a model, then
   predict with `"model": "name@production"`; retrain with `"register_as"`, move the alias, roll
   it back (`…/rollback`), read `…/history`;
6. `POST /experiments` — the paper's protocol over data sets and algorithms; then
   `GET /experiments/{id}/table.md|table.csv|margins.png|margins.svg`.

Errors are RFC 9457 `application/problem+json`.

**API keys**: once keys are in use, send `Authorization: Bearer <key>` (Swagger UI: *Authorize*).
Scopes: `read` — GETs and `POST /predict`, `/predict/file`; `write` — also uploads, training,
experiments, cancel, delete and registry changes; `admin` — also `/keys` and adding or deleting
webhooks. The protocols'
inference (`POST /v2/models/…/infer`, `POST /models/{ref}/invocations`) needs `read`, like
`/predict`. `/livez`, `/readyz`, `/v2/health/live`, `/v2/health/ready` and these docs are
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


def shut_down(app: FastAPI) -> None:
    """The app's shutdown (its lifespan's end): background writers drained and stopped (the
    runtime's parts: the prediction log's rows still queued, the shadow's), the pools closed.
    Idempotent."""
    app.state.auth.close()  # the last keys' last_used_at, before the pool goes
    app.state.runtime.close()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    locations.check_roots(settings.data_roots)  # a root no registration could use: refused now
    # The app's runtime state (app.core.runtime), made here (a TestClient used without ``with``
    # runs no lifespan) and closed at the lifespan's end (shut_down).
    runtime = Runtime(make_engine(settings.database_url, api_limits(settings)), settings)
    reserve.ensure(settings.database_url)  # room to delete at a full disk (SQLite)
    monitoring_sinks.register(runtime)  # the prediction log's and a shadow's (app.serving.sinks)
    loop_policies.register(runtime)  # the retraining policies step in the alert rounds

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        prediction_log.start(runtime)  # adopts a stopped writer's spool file
        alert_evaluator.start(runtime)  # the alert rules' windows and the webhooks' sends
        yield
        shut_down(app)

    # Swagger UI (/docs) and ReDoc (/redoc) with their scripts and styles served by the service
    # itself from fastapi-offline's package data (under /static-offline-docs), not from a CDN:
    # the pages work on hosts without internet access. ReDoc's page and script are ours
    # (app.apidocs: its bundle without the CDN logo).
    app = FastAPIOffline(
        title="msvmav",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        generate_unique_id_function=operation_id,
        lifespan=lifespan,
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        docs_url=DOCS_URL,
        redoc_url=None,
        static_url=STATIC_DOCS_URL,
        dependencies=[Depends(check_ids), Depends(check_request), Depends(reject_unknown_query)],
    )
    install_redoc(app, REDOC_URL, STATIC_DOCS_URL)
    relative_slash_redirects(app.router)  # no Location built from the request's Host
    set_state(app, settings, runtime)

    problems.install(app)
    # innermost: a static path's wrong method is a 405 before a parametrised route matches it
    app.add_middleware(StaticPathMethods)
    # after the body limit and the key check (the route's own scope: read)
    app.add_middleware(PredictFastPath, admitted=lambda scope: admitted(scope, Scope.read))
    app.add_middleware(
        BodySizeLimitMiddleware,
        upload_limit=settings.max_upload_bytes + MULTIPART_SLACK_BYTES,
        json_limit=settings.max_json_bytes,
        path_upload_limits={"/batch-predictions": (
            settings.batch_max_upload_bytes + MULTIPART_SLACK_BYTES,
            "MSVMAV_BATCH_MAX_UPLOAD_BYTES")},
    )
    app.add_middleware(AuthMiddleware, gate=app.state.auth, open_paths=open_paths(app))
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)

    # The scope each router needs: app.routers' table; the health probes (and the docs) are open.
    include_routers(app)
    app.openapi = lambda: custom_openapi(app)  # type: ignore[method-assign]
    return app


def set_state(app: FastAPI, settings: Settings, runtime: Runtime) -> None:
    """``app.state``: the settings, the runtime (app.core.deps.RuntimeDep) and, by their
    former names, its engine and session factories; the metrics and the key gate."""
    app.state.settings = settings
    app.state.runtime = runtime
    app.state.engine = runtime.engine
    app.state.session_factory = runtime.sessions
    app.state.read_session_factory = runtime.read_sessions  # GET, HEAD
    app.state.migration_heads = script_heads(settings.database_url)
    app.state.metrics = RequestMetrics()
    # More /metrics lines: per-model predictions, the process's memory, CPU and fds.
    app.state.metric_sources = [lambda: prediction_log.metric_lines(runtime),
                                lambda: monitoring_gauges(runtime)]
    app.state.auth = AuthGate(settings, runtime)


def monitoring_gauges(runtime: Runtime) -> list[str]:
    """The alert evaluator's last windows as gauges (app.alerts.gauges): one small read."""
    try:
        with runtime.read_sessions() as session:
            return gauge_lines(session)
    except SQLAlchemyError:
        return ["# msvmav_monitoring gauges unavailable: database error"]


def open_paths(app: FastAPI) -> set[str]:
    """Paths served without a key: the health probes and the API documentation with its
    scripts and styles (``/static-offline-docs/...``, fastapi-offline's mount, and ReDoc's
    script under ``/static-offline-redoc/``)."""
    # fastapi-offline serves /docs, app.apidocs /redoc (the app's docs_url/redoc_url are None).
    docs = (app.openapi_url, DOCS_URL, REDOC_URL, app.swagger_ui_oauth2_redirect_url)
    return {
        "/livez",
        "/readyz",
        *OPEN_PATHS,
        STATIC_DOCS_URL + "/",
        REDOC_ASSETS_URL + "/",
        *(p for p in docs if p),
    }
