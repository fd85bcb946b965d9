"""One router owns the ``/models`` path space (issue 43): ``app.routers.MODELS_ROUTER``
declares the prefix once and includes each domain's part; no other router of the app serves a
path under ``/models``, and no part declares that prefix itself."""

from __future__ import annotations

from fastapi.routing import iter_route_contexts

from app import routers
from app.core.config import Settings
from app.main import create_app


def _paths(routes) -> set[tuple[str, str]]:
    return {(m, r.path) for r in iter_route_contexts(routes) for m in (r.methods or ())}


def _under_models(path: str) -> bool:
    return path == "/models" or path.startswith("/models/")


def test_every_models_path_the_app_serves_is_the_models_router():
    app = create_app(Settings(database_url="sqlite://", _env_file=None))
    served = {op for op in _paths(app.router.routes) if _under_models(op[1])}
    owned = _paths(routers.MODELS_ROUTER.routes)
    # not vacuous: each domain's part is there (models, threshold, monitoring, export,
    # MLflow's invocations, evaluate/explain, the leaderboard)
    for op in [("GET", "/models"), ("DELETE", "/models/{model_id}"),
               ("POST", "/models/{model_ref:path}/threshold"),
               ("GET", "/models/{model_id}/monitoring"), ("POST", "/models/import"),
               ("POST", "/models/{model_ref:path}/invocations"),
               ("POST", "/models/{model_ref:path}/explain"), ("POST", "/models/leaderboard")]:
        assert op in owned, op
    assert served == owned
    others = [r for r, _ in routers.ROUTERS if r is not routers.MODELS_ROUTER]
    for router in [*others, *routers.OPEN_ROUTERS]:
        assert not [p for _, p in _paths(router.routes) if _under_models(p)]


def test_the_parts_declare_no_prefix_and_each_part_its_key():
    for part, access in routers.MODEL_PARTS:
        assert part.prefix == ""
        assert not [r.path for r in part.routes if _under_models(r.path)]
        assert access in (routers.Access.read, routers.Access.by_method)
    scopes = routers.operation_scopes()
    assert scopes[("POST", "/models/{model_ref}/invocations")] == "read"
    assert scopes[("POST", "/models/{model_ref}/threshold")] == "write"
    assert scopes[("POST", "/models/import")] == "write"
    assert scopes[("GET", "/models/{model_id}/monitoring")] == "read"
    assert scopes[("DELETE", "/models/{model_id}")] == "write"
