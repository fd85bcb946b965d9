"""The static-path map (app.core.routing), read off the routes' own paths and methods, is the
map of every route the app serves as FastAPI itself lists them (``iter_route_contexts``, which
expands the included routers with their prefixes and builds each route)."""

from __future__ import annotations

from fastapi.routing import iter_route_contexts

from app.core import routing
from app.core.config import Settings
from app.core.routing import static_map_of, static_methods
from app.main import create_app


def test_the_static_map_is_that_of_every_route_the_app_serves():
    app = create_app(Settings(database_url="sqlite://", _env_file=None))
    expected = static_map_of(iter_route_contexts(app.router.routes))
    assert len(expected) > 20  # the service's static paths: /predict, /datasets, /keys, ...
    assert routing._static_map(app.router) == expected
    assert static_methods(app.router, "/models/import") == expected["/models/import"] == ("POST",)
    assert static_methods(app.router, "/models/{model_id}") is None
    assert static_methods(app.router, "/no/such/path") is None
