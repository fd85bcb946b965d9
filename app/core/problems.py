"""RFC 9457 problem details for every 4xx and 5xx answer.

Raise ``Problem`` (or use the helpers ``not_found``, ``conflict``, ``invalid``) in services; the
handlers registered by ``install`` turn it, FastAPI's validation errors, Starlette's HTTP errors
and ``app.ingest.IngestError`` into ``application/problem+json`` bodies with ``type``, ``title``,
``status``, ``detail``, ``instance``, the request id and, for validation errors, an ``errors``
list whose entries name the field (and the row/column of an uploaded file).
"""

from __future__ import annotations

import logging
import re
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.db import classify_fault
from app.core.jsonable import jsonable
from app.core.logs import request_id_var
from app.core.routing import static_methods
from app.ingest import IngestError, IngestLimitError

PROBLEM_MEDIA_TYPE = "application/problem+json"
# Open Inference Protocol paths (app.protocols.v2): its clients (tritonclient) raise the text
# of an error answer's ``error`` member.
_OIP_PATH = re.compile(r"^/v2(/|$)")
TYPE_BASE = "urn:msvmav:problem:"
# Retry-After (seconds) of a 503 for a database that is away, busy or locked, unless the app's
# settings say otherwise (MSVMAV_RETRY_AFTER_SECONDS): a fixed, small value, since a client
# cannot be told when a server comes back and a blip is over within seconds.
RETRY_AFTER_SECONDS = 2

fault_log = logging.getLogger("app.faults")


class Problem(Exception):  # noqa: N818 - it is the answer, not only an error
    """An error answer. ``extra`` members are added to the body (e.g. ``row``, ``column``)."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        type: str = "about:blank",
        title: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.type = type
        self.title = title or HTTPStatus(status).phrase
        self.errors = errors
        self.headers = headers
        self.extra = extra


def not_found(kind: str, id: object, loc: list[str | int] | None = None) -> Problem:
    """404 for an id in the path; with ``loc`` (an id given in the body or query), a 404 whose
    ``errors`` name that field (``unknown``)."""
    if loc is not None:
        return unknown(loc, f"{kind} {id} not found")
    return missing(f"{kind} {id} not found")


def unknown(loc: list[str | int], message: str) -> Problem:
    """404 for a well-formed reference in the body or query that names nothing stored (``model_id``
    of no model, an alias the registered model lacks), its ``errors`` naming the field as a 422's
    do. Not a 422: the request is valid by the OpenAPI document, what it names does not exist."""
    field = _field_name(loc)
    return Problem(
        404,
        f"{field}: {message}",
        type=TYPE_BASE + "not-found",
        title="Not Found",
        errors=[{"loc": loc, "field": field, "message": message}],
    )


def missing(detail: str) -> Problem:
    """404 saying what was not found (``registered model 'credit' has no alias 'production'``)."""
    return Problem(404, detail, type=TYPE_BASE + "not-found", title="Not Found")


def conflict(detail: str, loc: list[str | int] | None = None) -> Problem:
    """409; with ``loc``, the detail and an ``errors`` entry name the input that conflicts with
    what is stored (an Idempotency-Key bound to another request)."""
    if loc is None:
        return Problem(409, detail, type=TYPE_BASE + "conflict", title="Conflict")
    field = _field_name(loc)
    return Problem(409, f"{field}: {detail}", type=TYPE_BASE + "conflict", title="Conflict",
                   errors=[{"loc": loc, "field": field, "message": detail}])


def too_large(detail: str, **extra: Any) -> Problem:
    return Problem(413, detail, type=TYPE_BASE + "too-large", title="Content Too Large", **extra)


#: Deepest accepted JSON body (app.core.validation): the top-level object or array is level 1.
MAX_JSON_DEPTH = 32


def too_deep(loc: list[str | int]) -> Problem:
    """422 for a JSON body nested deeper than MAX_JSON_DEPTH; ``loc`` is where it got too deep
    (``["body"]`` when the body was too deep for the JSON parser itself)."""
    return invalid(loc, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def invalid(loc: list[str | int], message: str, **extra: Any) -> Problem:
    """422 naming the offending input, e.g. ``invalid(["body", "alpha"], "must be > 0")``."""
    field = _field_name(loc)
    error = {"loc": loc, "field": field, "message": message, **extra}
    return Problem(
        422,
        f"{field}: {message}",
        type=TYPE_BASE + "validation-error",
        title="Validation Error",
        errors=[error],
        **extra,
    )


def _field_name(loc: list[Any] | tuple[Any, ...]) -> str:
    """``["body", "instances", 3]`` -> ``instances[3]``; pydantic's union-member tags such as
    ``list[any]`` are left out."""
    parts = [p for p in loc if not (isinstance(p, str) and "[" in p)]
    if len(parts) > 1 and parts[0] in ("body", "query", "path", "header", "form", "cookie"):
        parts = parts[1:]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or str(loc[0] if loc else "request")


class ProblemDetail(BaseModel):
    """RFC 9457 problem details (``application/problem+json``)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "type": "urn:msvmav:problem:validation-error",
                    "title": "Validation Error",
                    "status": 422,
                    "detail": "alpha: Input should be greater than 0",
                    "instance": "/train",
                    "request_id": "5f0c3e2a9b1d4c7e8f6a2b3c4d5e6f70",
                    "errors": [
                        {
                            "loc": ["body", "alpha"],
                            "field": "alpha",
                            "message": "Input should be greater than 0",
                            "type": "greater_than",
                        }
                    ],
                }
            ]
        },
    )

    type: str = Field("about:blank", description="URI identifying the problem type")
    title: str = Field(description="Short summary of the problem type")
    status: int = Field(description="HTTP status code")
    detail: str = Field(description="What went wrong here, naming the field, row or column")
    instance: str = Field(description="The request path")
    request_id: str | None = Field(None, description="The request's X-Request-ID")
    errors: list[dict[str, Any]] | None = Field(
        None, description="Validation errors: loc, field, message (and row, column for files)"
    )


def problem_response(request: Request | None, problem: Problem) -> JSONResponse:
    body: dict[str, Any] = {
        "type": problem.type,
        "title": problem.title,
        "status": problem.status,
        "detail": problem.detail,
        "instance": request.url.path if request is not None else "",
        "request_id": request_id_var.get(),
    }
    if problem.errors is not None:
        body["errors"] = problem.errors
    body.update(problem.extra)
    if _OIP_PATH.match(body["instance"]):  # any answer there, a 401 as well as a 404
        body.setdefault("error", problem.detail)
    return JSONResponse(
        body, status_code=problem.status, headers=problem.headers, media_type=PROBLEM_MEDIA_TYPE
    )


def _validation_problem(exc: RequestValidationError) -> Problem:
    errors = []
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        if err.get("type") == "json_invalid":  # loc is ("body", character offset)
            loc = ["body"]
        entry = {
            "loc": loc,
            "field": _field_name(loc),
            "message": err.get("msg", ""),
            "type": err.get("type", ""),
        }
        if "input" in err and err.get("type") != "missing":
            entry["input"] = jsonable(err["input"])
        errors.append(jsonable(entry))
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
    return Problem(
        422, detail, type=TYPE_BASE + "validation-error", title="Validation Error", errors=errors
    )


UPLOAD_OPTIONS = ("format", "label", "drop", "missing", "n_features", "header", "delimiter")


def ingest_problem(exc: IngestError, loc: list[str | int] | None = None) -> Problem:
    """A parse error of uploaded data: 422 naming the input, row and column at fault; 413
    (naming the same, and the ``setting``) for an upload beyond a size limit
    (IngestLimitError).

    ``loc`` defaults to the upload form field the error is about (an option such as ``label``,
    or ``file`` for the file's content)."""
    field = getattr(exc, "field", None)
    row = getattr(exc, "row", None)
    column = getattr(exc, "column", None)
    if loc is None:
        loc = ["body", field if field in UPLOAD_OPTIONS else "file"]
    name = _field_name(loc)
    error: dict[str, Any] = {"loc": loc, "field": name, "message": str(exc)}
    error.update({"row": row, "column": column})
    detail = str(exc)
    if isinstance(exc, IngestLimitError):
        return too_large(
            detail if name in detail else f"{name}: {detail}",
            errors=[jsonable(error)],
            field=name,
            row=jsonable(row),
            column=jsonable(column),
            setting=exc.setting,
        )
    return Problem(
        422,
        detail if name in detail else f"{name}: {detail}",
        type=TYPE_BASE + "ingest-error",
        title="Unprocessable Data",
        errors=[jsonable(error)],
        field=name,
        row=jsonable(row),
        column=jsonable(column),
    )


def database_problem(
    exc: BaseException, retry_after: int = RETRY_AFTER_SECONDS
) -> Problem | None:
    """The answer to a fault of the database or the disk (``app.core.db.classify_fault``): 503
    with ``Retry-After`` (away, busy, locked) or 507 (out of space), naming the cause without
    SQL; logged as one line, without a traceback. None for any other error (a bug: 500)."""
    fault = classify_fault(exc)
    if fault is None:
        return None
    fault_log.warning(
        "%s (%s: %s)",
        fault.reason,
        type(exc).__name__,
        _first_line(getattr(exc, "orig", None) or exc),
    )
    if fault.status == 507:
        return Problem(
            507, fault.reason, type=TYPE_BASE + "insufficient-storage", title="Insufficient Storage"
        )
    return Problem(
        503,
        f"{fault.reason}; retry in {retry_after} s",
        type=TYPE_BASE + "database-unavailable",
        title="Service Unavailable",
        headers={"Retry-After": str(retry_after)},
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem+json."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem_response(request, _validation_problem(exc))

    @app.exception_handler(IngestError)
    async def _ingest(request: Request, exc: IngestError) -> JSONResponse:
        return problem_response(request, ingest_problem(exc))

    async def _fault(request: Request, exc: Exception) -> JSONResponse:
        settings = getattr(request.app.state, "settings", None)
        retry_after = getattr(settings, "retry_after_seconds", RETRY_AFTER_SECONDS)
        problem = database_problem(exc, retry_after)
        if problem is None:
            raise exc  # a bug: the request context middleware logs it and answers 500
        return problem_response(request, problem)

    app.add_exception_handler(SQLAlchemyError, _fault)
    app.add_exception_handler(OSError, _fault)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
        if status == 404 and detail == "Not Found":
            detail = f"no route for {request.method} {request.url.path}"
        headers = dict(exc.headers) if exc.headers else {}
        if status == 400 and isinstance(exc.__cause__, RecursionError):  # JSON too deep to parse
            return problem_response(request, too_deep(["body"]))
        if status == 413:  # the body size cap: the same title and type as every other 413
            return problem_response(request, too_large(detail))
        if status == 405:
            headers["Allow"] = _allowed_methods(request) or headers.get("Allow", "")
        return problem_response(request, Problem(status, detail, headers=headers or None))


def _allowed_methods(request: Request) -> str:
    """Every method some route answers on this path (Starlette's own ``Allow`` names only
    those of the first route whose path matches); a static path's own routes only
    (``app.core.routing``)."""
    static = static_methods(request.app.router, request.scope["path"])
    if static is not None:
        return ", ".join(static)
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]
    return ", ".join(allowed)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries documenting problem+json answers."""
    descriptions = {
        400: "Bad request",
        404: "Unknown id (or registered model, version or alias)",
        409: "Conflict with the resource's state",
        413: "Upload or batch too large",
        422: "Invalid input: the `errors` list names each field (and row/column of a file)",
        503: "Not ready",
        507: "Out of disk space",
    }
    return {
        s: {
            "model": ProblemDetail,
            "description": descriptions.get(s, HTTPStatus(s).phrase),
        }
        for s in statuses
    }
