"""/registered-models routes: thin wrappers of app.registry.service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response, Security, status
from fastapi.responses import JSONResponse

from app.auth.keys import Principal
from app.auth.security import require_by_method
from app.core.deps import SessionDep
from app.core.pagination import PageDep
from app.core.problems import problem_responses
from app.registry import service
from app.registry.paths import AliasPath, NamePath, VersionPath
from app.registry.schemas import (
    AliasMoveOut,
    AliasOut,
    AliasPatch,
    AliasUpdate,
    HistoryPage,
    RegisteredModelCreate,
    RegisteredModelDetail,
    RegisteredModelPage,
    RegisteredModelUpdate,
    VersionCreate,
    VersionCreated,
)

router = APIRouter(prefix="/registered-models", tags=["registry"])

# The key that made the request (the router's own scope check, cached: not run twice); None
# when keys are off.
ActorDep = Annotated[Principal | None, Security(require_by_method)]


# Swagger UI's prefilled bodies; they work after the README's registry walkthrough (which
# registers `wdbc` with versions 1 and 2 and points `production` at one of them).
_CREATE_EXAMPLES = {
    "credit": {
        "summary": "A new registered model",
        "value": {"name": "credit", "description": "Credit scoring", "tags": {"team": "risk"}},
    }
}
_UPDATE_EXAMPLES = {
    "description": {
        "summary": "New description",
        "value": {"description": "Breast cancer diagnosis (UCI wdbc), retrained weekly"},
    },
    "tags": {"summary": "Replace the tags", "value": {"tags": {"team": "oncology"}}},
}
_VERSION_EXAMPLES = {"model 1": {"summary": "Stored model 1", "value": {"model_id": 1}}}
_ALIAS_EXAMPLES = {
    "version 1": {"summary": "Point the alias at version 1", "value": {"version": 1}},
    "canary": {"summary": "Version 1, with version 2 answering 10 % of the requests",
               "value": {"version": 1, "canary": {"version": 2, "percent": 10}}},
}
# (``{"canary": null}`` ends it; the document cannot show that example: FastAPI drops the null)
_PATCH_EXAMPLES = {
    "canary": {"summary": "Version 2 answers 10 % of the alias's requests",
               "value": {"canary": {"version": 2, "percent": 10}}},
}
_CANARY_DOC = (
    " With `canary`, another version answers `percent` of the alias's requests at every door "
    "(/predict, /predict/file, /v2 infer, invocations, batch jobs), sticky by the "
    "`X-Msvmav-Route-Key` header or else the first row's id (a hash of the alias and the key: "
    "the same key always gets the same arm), at random without either; each answer says which "
    "version answered (`version`, `arm`, the `X-Msvmav-Model-Version` header) and the "
    "prediction log records it. 422 naming `canary.percent` (not above 0 and below 100) or "
    "`canary.version` (the alias's own version, or no such version)."
)


def _actor(principal: Principal | None) -> str | None:
    return principal.name if principal is not None else None


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a registered model",
    description="A name for a line of models; versions are added by `POST …/versions` or by "
    '`POST /train` with `"register_as"`. 409 when the name is taken.',
    response_model=RegisteredModelDetail,
    responses={
        201: {"headers": {"Location": {"schema": {"type": "string"}}}},
        **problem_responses(409, 422),
    },
)
def create_registered_model(
    session: SessionDep,
    request: Annotated[RegisteredModelCreate, Body(openapi_examples=_CREATE_EXAMPLES)],
) -> JSONResponse:
    registered = service.create(session, request.name, request.description, request.tags)
    body = RegisteredModelDetail.model_validate(service.detail(session, registered))
    return JSONResponse(
        body.model_dump(mode="json"),
        status_code=status.HTTP_201_CREATED,
        headers={"Location": f"/registered-models/{registered.name}"},
    )


@router.get(
    "",
    summary="List registered models",
    description="Newest first, `limit` per page; follow `next_cursor` for the next page.",
    response_model=RegisteredModelPage,
    responses=problem_responses(422),
)
def list_registered_models(session: SessionDep, page: PageDep) -> RegisteredModelPage:
    rows, cursor = service.list_page(session, page)
    items = service.summaries(session, rows)
    return RegisteredModelPage.model_validate({"items": items, "next_cursor": cursor})


@router.get(
    "/{name}",
    summary="Get a registered model",
    description="Its versions (newest first, with each stored model's algorithm and hold-out "
    "accuracy), its aliases and tags.",
    response_model=RegisteredModelDetail,
    responses=problem_responses(404),
)
def get_registered_model(session: SessionDep, name: NamePath) -> RegisteredModelDetail:
    registered = service.get_or_raise(session, name)
    return RegisteredModelDetail.model_validate(service.detail(session, registered))


@router.patch(
    "/{name}",
    summary="Update a registered model",
    description="Replaces the description and/or the tags (those given).",
    response_model=RegisteredModelDetail,
    responses=problem_responses(404, 422),
)
def update_registered_model(
    session: SessionDep,
    name: NamePath,
    request: Annotated[RegisteredModelUpdate, Body(openapi_examples=_UPDATE_EXAMPLES)],
) -> RegisteredModelDetail:
    registered = service.update(session, name, description=request.description, tags=request.tags)
    return RegisteredModelDetail.model_validate(service.detail(session, registered))


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a registered model",
    description="With its versions and history; the stored models stay. 409 while an alias "
    "points at one of its versions.",
    responses=problem_responses(404, 409),
)
def delete_registered_model(session: SessionDep, name: NamePath) -> Response:
    service.delete(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{name}/versions",
    status_code=status.HTTP_201_CREATED,
    summary="Register a stored model as the next version",
    response_model=VersionCreated,
    responses=problem_responses(404, 422),
)
def create_model_version(
    session: SessionDep,
    name: NamePath,
    request: Annotated[VersionCreate, Body(openapi_examples=_VERSION_EXAMPLES)],
) -> VersionCreated:
    version = service.register(session, name, request.model_id, create_missing=request.create)
    return VersionCreated(name=name, version=version.version, model_id=version.model_id)


@router.delete(
    "/{name}/versions/{version}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove a version",
    description="The stored model stays (and may then be deleted). 409 while an alias points "
    "at the version. Version numbers are never given again.",
    responses=problem_responses(404, 409),
)
def delete_model_version(session: SessionDep, name: NamePath, version: VersionPath) -> Response:
    service.delete_version(session, name, version)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put(
    "/{name}/aliases/{alias}",
    summary="Point an alias at a version",
    description="Creates the alias or moves it; the move is recorded in the history. The API "
    "process that answers predicts with the new version from its next request on, every other "
    "within MSVMAV_SERVE_RECHECK_SECONDS (1 s by default). PUT replaces the alias: a canary it "
    "had ends unless the body gives one (PATCH changes only the canary)." + _CANARY_DOC,
    response_model=AliasOut,
    responses=problem_responses(404, 422),
)
def set_model_alias(
    session: SessionDep,
    principal: ActorDep,
    name: NamePath,
    alias: AliasPath,
    request: Annotated[AliasUpdate, Body(openapi_examples=_ALIAS_EXAMPLES)],
) -> AliasOut:
    canary = request.canary.spec() if request.canary is not None else None
    version, before = service.set_alias(session, name, alias, request.version,
                                        _actor(principal), canary=canary)
    return AliasOut.model_validate(service.alias_view(session, name, alias, version, before))


@router.patch(
    "/{name}/aliases/{alias}",
    summary="Start, change or end an alias's canary",
    description="The alias keeps its version; `canary` is its canary from now on "
    "(`{\"canary\": null}` ends it). "
    "Recorded in the history (`action` `canary`, with the canary before and after); a "
    "rollback undoes it." + _CANARY_DOC,
    response_model=AliasOut,
    responses=problem_responses(404, 422),
)
def patch_model_alias(
    session: SessionDep,
    principal: ActorDep,
    name: NamePath,
    alias: AliasPath,
    request: Annotated[AliasPatch, Body(openapi_examples=_PATCH_EXAMPLES)],
) -> AliasOut:
    canary = request.canary.spec() if request.canary is not None else None
    version = service.set_canary(session, name, alias, canary, _actor(principal))
    return AliasOut.model_validate(service.alias_view(session, name, alias, version, version))


@router.delete(
    "/{name}/aliases/{alias}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Remove an alias",
    description="Recorded in the history; a rollback brings it back.",
    responses=problem_responses(404),
)
def delete_model_alias(
    session: SessionDep, principal: ActorDep, name: NamePath, alias: AliasPath
) -> Response:
    service.delete_alias(session, name, alias, _actor(principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{name}/aliases/{alias}/rollback",
    summary="Move an alias back",
    description="Undoes the alias's newest move not undone yet: back to the version it pointed "
    "at before that move, recorded as a move of its own. Successive rollbacks walk back "
    "through the history (1 -> 2 -> 3, a rollback -> 2, another -> 1). 409 when there is "
    "nothing to go back to (that move created the alias, or every move is undone) or that "
    "version was deleted since.",
    response_model=AliasOut,
    responses=problem_responses(404, 409),
)
def rollback_model_alias(
    session: SessionDep, principal: ActorDep, name: NamePath, alias: AliasPath
) -> AliasOut:
    version, before = service.rollback_alias(session, name, alias, _actor(principal))
    return AliasOut.model_validate(service.alias_view(session, name, alias, version, before))


@router.get(
    "/{name}/history",
    summary="History of a registered model's aliases",
    description="Every alias move, newest first: alias, from and to version (null: created / "
    "removed), when, and the name of the API key that made it (null when keys are off).",
    response_model=HistoryPage,
    responses=problem_responses(404, 422),
)
def get_model_history(session: SessionDep, name: NamePath, page: PageDep) -> HistoryPage:
    return HistoryPage.of(service.history_page(session, name, page), AliasMoveOut.model_validate)
