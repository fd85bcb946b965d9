"""The OpenAPI document: FastAPI's, with every error answer documented as RFC 9457
problem+json (one true example per operation and status, ``app.error_examples``) instead of
FastAPI's default ``HTTPValidationError``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.auth.keys import Scope
from app.core import problems
from app.error_examples import error_example
from app.routers import operation_scopes

# Documented on every operation with a request body.
BODY_ERRORS = {
    "400": "Malformed body: not parseable as JSON or as multipart/form-data",
    "413": "Body larger than MSVMAV_MAX_JSON_BYTES (JSON) or MSVMAV_MAX_UPLOAD_BYTES (upload)",
    "422": "Invalid input: the `errors` list names each field (and row/column of a file)",
}


def custom_openapi(app: FastAPI) -> dict[str, Any]:
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
    scopes = operation_scopes()
    for path, path_item in schema.get("paths", {}).items():
        for method, op in path_item.items():
            needed = scopes.get((method.upper(), path))
            if needed is Scope.read:
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
                        "example": error_example(int(code), path, op, method.upper(), needed),
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
