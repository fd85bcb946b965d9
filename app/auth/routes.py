"""/keys routes (scope admin, attached in app.main)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status

from app.auth import service
from app.auth.schemas import KeyCreate, KeyCreated, KeyOut, KeyPage
from app.core.deps import SessionDep
from app.core.pagination import PageDep
from app.core.problems import problem_responses

router = APIRouter(prefix="/keys", tags=["keys"])

_CREATE_EXAMPLES = {
    "read key for CI": {
        "summary": "A read-only key (GETs and predictions) named ci",
        "value": {"name": "ci", "scope": "read"},
    },
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create an API key",
    description="Answers the new key's secret in `key`: the only time it is shown (only its "
    "SHA-256 is stored).",
    response_model=KeyCreated,
    responses={
        201: {
            "description": "Key created",
            "headers": {"Location": {"description": "/keys/{id}", "schema": {"type": "string"}}},
        },
        **problem_responses(422),
    },
)
def create_key(
    session: SessionDep,
    request: Request,
    response: Response,
    body: Annotated[KeyCreate, Body(openapi_examples=_CREATE_EXAMPLES)],
) -> KeyCreated:
    row, secret = service.create(session, body.name, body.scope, body.expires_at)
    request.app.state.auth.key_created()
    response.headers["Location"] = f"/keys/{row.id}"
    return KeyCreated(**KeyOut.model_validate(row).model_dump(), key=secret)


@router.get(
    "",
    summary="List API keys",
    description="Newest first, revoked ones included; never a secret or hash.",
    response_model=KeyPage,
    responses=problem_responses(422),
)
def list_keys(session: SessionDep, page: PageDep) -> KeyPage:
    return KeyPage.of(service.list_page(session, page), KeyOut.model_validate)


@router.get(
    "/{key_id}",
    summary="Get an API key (without its secret)",
    response_model=KeyOut,
    responses=problem_responses(404),
)
def get_key(session: SessionDep, key_id: int) -> KeyOut:
    return KeyOut.model_validate(service.get_or_raise(session, key_id))


@router.delete(
    "/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Revoke an API key",
    description="Takes effect at once in the process that answers; other API processes stop "
    "accepting the key within MSVMAV_SERVE_RECHECK_SECONDS (1 s by default). "
    "The row stays (listed with `revoked_at`).",
    responses=problem_responses(404),
)
def revoke_key(request: Request, session: SessionDep, key_id: int) -> Response:
    service.revoke(session, key_id)
    request.app.state.auth.forget_keys()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
