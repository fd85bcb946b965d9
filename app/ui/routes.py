"""/ui: the interface's page shells and assets (open: they hold no data) and /ui-api (a key of
scope read): who the key is, and the overview's counts.

A shell is the navigation bar, the page's title and its script; the script asks the JSON API
for everything it shows, sending the key the person entered once per browser session
(sessionStorage) as ``Authorization: Bearer``. No cookie carries the key, so no other site can
make the browser act with it (no CSRF surface), and the data pass through the same scope
checks as any client's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response, Security
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from app.auth.gate import AuthGate
from app.auth.keys import Principal, Scope
from app.auth.security import require
from app.core.deps import RuntimeDep, SessionDep, SettingsDep
from app.core.problems import Problem, problem_responses
from app.loop import policy_service
from app.loop.schemas import PolicyOut
from app.models import service as models
from app.monitoring import shadow_service
from app.registry import service as registry
from app.registry.paths import NamePath
from app.registry.references import NAME_PATTERN
from app.training.msvmav_fields import offered
from app.ui import overview as overview_service
from app.ui.pages import BY_SLUG, PAGES
from app.ui.schemas import ModelVersions, OverviewOut, PolicyOrNone, SessionOut, ShadowOrNone
from app.ui.security_headers import HEADERS
from solver import CALIBRATIONS, PAPER_ORDER

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
UI_PREFIX = "/ui"
STATIC_PREFIX = UI_PREFIX + "/static"
API_PREFIX = "/ui-api"

# Starlette autoescapes .html templates (select_autoescape): the ident from the path is escaped.
templates = Jinja2Templates(directory=str(HERE / "templates"))
#: the shells and the redirect; open (app.main lists their paths)
pages_router = APIRouter(include_in_schema=False)
#: the JSON the pages need beyond the API's own routes; app.routers requires a read key
api_router = APIRouter(prefix=API_PREFIX, tags=["ui"])


def _asset_version() -> str:
    """Changes when any asset changes, so browsers fetch the new files after an upgrade."""
    stamps = [int(p.stat().st_mtime) for p in STATIC_DIR.rglob("*") if p.is_file()]
    return format(max(stamps, default=0), "x")


ASSET_VERSION = _asset_version()

#: The registry's name rule (NAME_PATTERN, not all digits) as an HTML ``pattern``: browsers
#: compile patterns with the ``v`` flag, under which a ``-`` inside a class must be escaped
#: (``[._-]`` is a SyntaxError there: no validation, and a console error).
HTML_NAME_PATTERN = "(?![0-9]+$)" + NAME_PATTERN.replace("_-]", r"_\-]")

#: The tab's icon (a page without one makes the browser ask for /favicon.ico, a 401 when keys
#: are required); the shells link it, it is served openly as the shells are.
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#14213d"/>'
    '<path d="M3 12V4l5 5 5-5v8" fill="none" stroke="#fff" stroke-width="2"/></svg>'
)


@pages_router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse(UI_PREFIX, status_code=307)


def _shell(request: Request, slug: str, ident: str | None) -> HTMLResponse:
    page = BY_SLUG[slug]
    context = {
        "page": page,
        "pages": PAGES,
        "ident": ident or "",
        "static": STATIC_PREFIX,
        "version": ASSET_VERSION,
        "algorithms": " ".join(PAPER_ORDER),
        "kernels": " ".join(offered("kernel")),  # /train's, as its request schema lists them
        "calibrations": " ".join(CALIBRATIONS),
        "name_pattern": HTML_NAME_PATTERN,
    }
    response = templates.TemplateResponse(request, "page.html", context)
    response.headers.update(HEADERS)
    return response


def _list_handler(slug: str) -> Callable[[Request], HTMLResponse]:
    def handler(request: Request) -> HTMLResponse:
        return _shell(request, slug, None)

    return handler


def _detail_handler(slug: str) -> Callable[[Request, str], HTMLResponse]:
    def handler(request: Request, ident: str) -> HTMLResponse:
        return _shell(request, slug, ident)

    return handler


# One route per page, and per detail page (/ui/models/{ident}); the ident is only echoed in the
# shell (escaped), the page's script asks the API for it.
for _page in PAGES:
    _path = UI_PREFIX + (f"/{_page.slug}" if _page.slug else "")
    pages_router.add_api_route(_path, _list_handler(_page.slug), response_class=HTMLResponse,
                               name=f"ui_{_page.slug or 'overview'}")
    if _page.detail:
        pages_router.add_api_route(_path + "/{ident}", _detail_handler(_page.slug),
                                   response_class=HTMLResponse, name=f"ui_{_page.slug}_detail")


@pages_router.get(UI_PREFIX + "/favicon.svg")
def favicon() -> Response:
    return Response(FAVICON_SVG, media_type="image/svg+xml",
                    headers={**HEADERS, "Cache-Control": "public, max-age=86400"})


@pages_router.get(UI_PREFIX + "/session")
def session_probe(request: Request) -> JSONResponse:
    """Open: whether the service needs a key and whether the request's key (if any) is good,
    always as 200, so that a page asks before signing in without a 401 in the console:
    ``{"authenticated", "auth_required", "name", "scope", "detail"}``. It says no more than
    /ui-api/session's 200 or 401 would. A sync route: the key check may read the database."""
    gate: AuthGate = request.app.state.auth
    body: dict[str, Any] = {"authenticated": True, "auth_required": False, "name": None,
                            "scope": Scope.admin.value, "detail": None}
    if gate.required():
        try:
            principal = gate.authenticate(request.headers.get("authorization"))
        except Problem as exc:
            body.update(authenticated=False, auth_required=True, scope=None, detail=exc.detail)
        else:
            body.update(auth_required=True, name=principal.name, scope=principal.scope.value)
    return JSONResponse(body, headers={**HEADERS, "Cache-Control": "no-store"})


_Principal = Annotated[Principal | None, Security(require(Scope.read))]


@api_router.get("/session", summary="The key in use: its name and scope", response_model=SessionOut)
async def session_info(principal: _Principal) -> dict[str, Any]:
    """The pages show write controls only to a key whose scope allows them. An open service
    (no keys configured) acts as admin for everyone."""
    if principal is None:
        return {"auth_required": False, "name": None, "scope": Scope.admin.value}
    return {"auth_required": True, "name": principal.name, "scope": principal.scope.value}


@api_router.get(
    "/overview", summary="Counts for the interface's overview page", response_model=OverviewOut
)
def overview(session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    return overview_service.overview(session, settings.lease_seconds)


@api_router.get(
    "/models/{model_id}/versions",
    summary="The registered versions a stored model is",
    response_model=ModelVersions,
    responses=problem_responses(404),
)
def model_versions(session: SessionDep, model_id: int) -> dict[str, Any]:
    """For the model page's links to its registered versions (none: an empty list)."""
    models.get_or_raise(session, model_id)
    pairs = models.registered_versions(session, model_id)
    return {"versions": [{"name": n, "version": v} for n, v in pairs]}


@api_router.get(
    "/registered-models/{name}/shadow",
    summary="A registered model's shadow report, or null when it has none",
    response_model=ShadowOrNone,
    responses=problem_responses(404),
)
def shadow_or_none(runtime: RuntimeDep, session: SessionDep, name: NamePath) -> dict[str, Any]:
    """As GET /registered-models/{name}/shadow, but 200 with ``{"shadow": null}`` for a
    registered model without one: the monitoring page asks for every registered model it
    shows, and a 404 would log an error in the browser's console. 404 for an unknown name."""
    registry.get_or_raise(session, name)
    try:
        return {"shadow": shadow_service.shadow_report(session, runtime, name)}
    except Problem as exc:
        if exc.status != 404:
            raise
        return {"shadow": None}


@api_router.get(
    "/registered-models/{name}/policy",
    summary="A registered model's retraining policy, or null when it has none",
    response_model=PolicyOrNone,
    responses=problem_responses(404),
)
def policy_or_none(runtime: RuntimeDep, session: SessionDep, name: NamePath) -> dict[str, Any]:
    """As GET /registered-models/{name}/policy (the policy, its state, the challenger's
    record), but 200 with ``{"policy": null}`` without one (the registry page asks for every
    registered model it shows). 404 for an unknown name."""
    registry.get_or_raise(session, name)
    try:
        policy = policy_service.get_or_raise(session, name)
    except Problem as exc:
        if exc.status != 404:
            raise
        return {"policy": None}
    out = PolicyOut.model_validate(policy_service.view(session, runtime, name, policy))
    return {"policy": out.model_dump(mode="json")}
