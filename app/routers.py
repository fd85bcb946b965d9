"""Every router of the service and the scope of API key it needs, in one table: ``app.main``
attaches the dependencies from it and the OpenAPI document (``app.openapi``) derives each
operation's 403 answer from it.

The ``/models`` path space (a stored model by id, or any model by reference: ``/models/{ref}/
...``) is one router's, ``MODELS_ROUTER``: it declares the prefix once and includes, in the
order they are matched, the parts each domain contributes (``MODEL_PARTS``: routers without a
prefix, each with the key its operations need). No other router serves a path under
``/models`` (tests/app/test_model_router.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from fastapi import APIRouter, FastAPI, Security
from fastapi.staticfiles import StaticFiles

from app.alerts.routes import hooks_router
from app.alerts.routes import router as alerts_router
from app.auth.keys import Scope
from app.auth.routes import router as keys_router
from app.auth.security import AUTH_RESPONSES, require, require_by_method
from app.batch.routes import router as batch_router
from app.core.deps import READ_METHODS
from app.core.routing import record_included
from app.datasets.routes import router as datasets_router
from app.experiments.routes import router as experiments_router
from app.export.routes import router as export_router
from app.jobs.routes import router as jobs_router
from app.loop.routes import router as loop_router
from app.models.routes import router as models_router
from app.monitoring.routes import model_router as model_monitoring_router
from app.monitoring.routes import router as monitoring_router
from app.operations.routes import metrics_router
from app.operations.routes import router as health_router
from app.predict.leaderboard_routes import models_router as models_leaderboard_router
from app.predict.leaderboard_routes import router as leaderboard_router
from app.predict.routes import models_router as model_doors_router
from app.predict.routes import router as predict_router
from app.predict.threshold_routes import router as threshold_router
from app.protocols import mlflow, v2
from app.registry.routes import router as registry_router
from app.training.routes import router as training_router
from app.ui.routes import STATIC_DIR, STATIC_PREFIX, UI_PREFIX
from app.ui.routes import api_router as ui_api_router
from app.ui.routes import pages_router as ui_pages_router


class Access(StrEnum):
    """Which key a router's operations need (see app.auth.security)."""

    read = "read"  # a read key, whatever the method (POST /predict only reads)
    by_method = "by method"  # read for GET and HEAD, write for anything else
    admin = "admin"
    parts = "its parts'"  # MODELS_ROUTER: each part of MODEL_PARTS says


MODELS_PREFIX = "/models"
#: The parts of the /models router, in the order they are matched, with the key each needs.
MODEL_PARTS: tuple[tuple[APIRouter, Access], ...] = (
    (models_router, Access.by_method),  # list, get, delete, margins
    (threshold_router, Access.by_method),  # POST …/threshold stores a decision rule (write)
    (model_monitoring_router, Access.by_method),  # a stored model's monitoring report
    (export_router, Access.by_method),  # GET …/export reads; POST /models/import writes
    (mlflow.router, Access.read),  # MLflow's …/invocations: only reads, like /predict
    (model_doors_router, Access.read),  # evaluate and explain only read, like /predict
    (models_leaderboard_router, Access.read),  # compares models: only reads, like evaluate
)


def _dependencies(access: Access) -> list[Any]:
    if access is Access.by_method:
        return [Security(require_by_method)]
    return [Security(require(Scope(access.value)))]


def _models_router() -> APIRouter:
    router = APIRouter()
    for part, access in MODEL_PARTS:
        router.include_router(part, prefix=MODELS_PREFIX, dependencies=_dependencies(access))
    return router


MODELS_ROUTER = _models_router()


# Routes are matched in the order they are included: /predict, the hot path, first.
ROUTERS: tuple[tuple[APIRouter, Access], ...] = (
    (predict_router, Access.read),
    (datasets_router, Access.by_method),
    (training_router, Access.by_method),
    (jobs_router, Access.by_method),
    (batch_router, Access.by_method),  # POST queues a job (write); the downloads read
    (MODELS_ROUTER, Access.parts),  # /models and /models/{ref}/…: MODEL_PARTS
    (registry_router, Access.by_method),
    (loop_router, Access.by_method),  # POST …/retrain queues a job, PUT …/policy (write)
    (monitoring_router, Access.by_method),  # POST /feedback writes; the reports read
    (alerts_router, Access.by_method),  # alert rules, webhooks, deliveries: changes write
    (hooks_router, Access.admin),  # adding or deleting a webhook (it sends to any URL)
    (experiments_router, Access.by_method),
    (keys_router, Access.admin),
    (metrics_router, Access.read),
    (v2.router, Access.read),  # the Open Inference Protocol: infer only reads, like /predict
    (ui_api_router, Access.read),  # the web interface's session and overview
    (leaderboard_router, Access.read),  # a dataset's leaderboard
)
#: Open to anyone: the health probes (ours and the Open Inference Protocol's) and the web
#: interface's page shells (they hold no data: their scripts read the API with a key).
OPEN_ROUTERS: tuple[APIRouter, ...] = (health_router, v2.health_router, ui_pages_router)
#: Their paths, served without a key (besides /livez and /readyz); "/…/" is a prefix: "/ui/"
#: covers the shells, /ui/favicon.svg and the /ui/session probe (app.ui.routes).
OPEN_PATHS: tuple[str, ...] = (*v2.HEALTH_PATHS, "/", UI_PREFIX, UI_PREFIX + "/")


def needed_scope(access: Access, method: str) -> Scope:
    if access is Access.by_method:
        return Scope.read if method in READ_METHODS else Scope.write
    return Scope(access.value)


def include_routers(app: FastAPI) -> None:
    for router, access in ROUTERS:
        dependencies = [] if access is Access.parts else _dependencies(access)
        app.include_router(router, dependencies=dependencies, responses=AUTH_RESPONSES)
    # before the pages' catch-all /ui/{rest:path}
    app.mount(STATIC_PREFIX, StaticFiles(directory=STATIC_DIR), name="ui-static")
    for router in OPEN_ROUTERS:
        app.include_router(router)
    keyed = [(prefix, router) for prefix, router, _ in keyed_routers()]
    record_included(app.router, [*keyed, *(("", router) for router in OPEN_ROUTERS)])


def keyed_routers() -> Iterator[tuple[str, APIRouter, Access]]:
    """(prefix, router, access) of every router a key is needed for, in ROUTERS' order, the
    /models router as its parts under its prefix."""
    for router, access in ROUTERS:
        if access is Access.parts:
            yield from ((MODELS_PREFIX, part, a) for part, a in MODEL_PARTS)
        else:
            yield "", router, access


_CONVERTER = re.compile(r"\{(\w+):\w+\}")


def operation_scopes() -> dict[tuple[str, str], Scope]:
    """(METHOD, path) → the scope that operation needs, for every keyed operation."""
    scopes: dict[tuple[str, str], Scope] = {}
    for prefix, router, access in keyed_routers():
        for route in router.routes:
            for method in getattr(route, "methods", None) or ():
                # the OpenAPI document writes {name:path} as {name}
                path = _CONVERTER.sub(r"{\1}", prefix + route.path)
                scopes[(method, path)] = needed_scope(access, method)
    return scopes
