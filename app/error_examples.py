"""OpenAPI examples of the problem+json error answers: one true example per operation and
status (a 404 example has status 404 and the detail the route really gives, and so on), so
that Swagger UI does not show the same /train 422 under every error code."""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

from app.auth import gate
from app.auth.keys import Principal, Scope
from app.core.ids import NOT_AN_ID
from app.core.problems import TYPE_BASE, Problem

_REQUEST_ID = "5f0c3e2a9b1d4c7e8f6a2b3c4d5e6f70"
_ID_PARAM = re.compile(r"\{(\w+)_id\}")
MISSING_ID = 999

# 409 answers, by operation id.
_CONFLICTS = {
    "delete_dataset": "dataset {id} is used by a queued or running job; cancel it first",
    "cancel_job": "job {id} already succeeded; only queued or running jobs can be cancelled",
    "delete_model": "model {id} is version 1 of registered model 'wdbc'; remove the version "
    "first (DELETE /registered-models/{{name}}/versions/{{version}})",
    "create_registered_model": "registered model 'wdbc' already exists",
    "delete_registered_model": "registered model 'wdbc' still has aliases ('production' -> "
    "version 1); remove them first",
    "delete_model_version": "version 1 of registered model 'wdbc' is the target of alias "
    "'production'; move or remove the alias first",
    "rollback_model_alias": "alias 'production' of registered model 'wdbc' has no earlier "
    "version to go back to",
}
# 404 answers of the registry's routes (named, not numbered), by operation id.
_REGISTRY_NOT_FOUND = {
    "predict": "registered model 'wdbc' has no alias 'staging'",
    "predict_file": "registered model 'wdbc' has no alias 'staging'",
    "delete_model_version": "registered model 'wdbc' has no version 7",
    "delete_model_alias": "registered model 'wdbc' has no alias 'staging'",
}
_REGISTRY_PARAMS = {"{name}": "wdbc", "{alias}": "production", "{version}": "1"}
_EXPERIMENT_CONFLICT = "experiment {id} is running; tables and plots exist once it has succeeded"

# 413 answers, by operation id.
_TOO_LARGE = {
    "create_dataset": (
        "dataset has 2000001 rows; the limit is 2000000 (MSVMAV_MAX_ROWS)",
        {"field": "file"},
    ),
    "predict": (
        "100001 rows; at most 100000 per request (MSVMAV_MAX_PREDICT_INSTANCES)",
        {"field": "instances"},
    ),
    "predict_file": (
        "100001 rows; at most 100000 per request (MSVMAV_MAX_PREDICT_INSTANCES)",
        {"field": "file"},
    ),
    "import_model": (
        "bundle is 209715201 bytes; the limit is 209715200 (MSVMAV_MAX_UPLOAD_BYTES)",
        {"field": "file"},
    ),
}

# 422 answers whose cause is in the body, by operation id: (loc, message, error entry extras).
_INVALID_BODY: dict[str, tuple[list[str | int], str, dict[str, Any]]] = {
    "create_train_job": (
        ["body", "alpha"],
        "Input should be greater than 0",
        {"type": "greater_than", "input": 0},
    ),
    "predict": (["body", "model_id"], "Input should be greater than or equal to 1",
                {"type": "greater_than_equal", "input": 0}),
    "create_registered_model": (
        ["body", "name"],
        "a name may not be all digits (that reads as a model id)",
        {"type": "value_error", "input": "123"},
    ),
    "create_model_version": (["body", "model_id"], "Input should be greater than or equal to 1",
                {"type": "greater_than_equal", "input": 0}),
    "predict_file": (["body", "model_id"], "Input should be greater than or equal to 1",
                {"type": "greater_than_equal", "input": "0"}),
    "import_model": (
        ["body", "file"],
        "bundle format version 2 is newer than this service reads (up to 1); upgrade msvmav",
        {"member": "manifest.json"},
    ),
    "create_experiment": (
        ["body", "splits"],
        "Input should be greater than or equal to 1",
        {"type": "greater_than_equal", "input": 0},
    ),
}
_LABEL_NOT_FOUND = (
    "Label column 'Klass' not found; available columns: 'V1', 'V2', 'V3', 'V4', 'V5', 'V6', "
    "'V7', 'V8', 'V9', 'V10', 'V11', 'V12', 'V13', 'V14', 'V15', 'V16', 'V17', 'V18', 'V19', "
    "'V20', ... (11 more)."
)


def _instance(path: str, value: object) -> str:
    for param, example in _REGISTRY_PARAMS.items():
        path = path.replace(param, example)
    return _ID_PARAM.sub(str(value), path)


def _problem(status: int, instance: str, detail: str, **extra: Any) -> dict[str, Any]:
    kinds = {
        404: ("not-found", "Not Found"),
        409: ("conflict", "Conflict"),
        413: ("too-large", "Content Too Large"),
        422: ("validation-error", "Validation Error"),
    }
    slug, title = kinds.get(status, ("", HTTPStatus(status).phrase))
    return {
        "type": TYPE_BASE + slug if slug else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        "request_id": _REQUEST_ID,
        **extra,
    }


def _from_problem(problem: Problem, instance: str) -> dict[str, Any]:
    """The body ``problem_response`` gives for ``problem`` at ``instance``."""
    body = _problem(problem.status, instance, problem.detail, **problem.extra)
    if problem.errors is not None:
        body["errors"] = problem.errors
    return {**body, "type": problem.type, "title": problem.title}


def _invalid(instance: str, loc: list[str | int], message: str, **entry: Any) -> dict[str, Any]:
    field = ".".join(str(p) for p in loc[1:])
    error = {"loc": loc, "field": field, "message": message, **entry}
    return _problem(422, instance, f"{field}: {message}", errors=[error])


# How a 404 names the thing an id parameter refers to, where it is not the parameter's stem.
_KIND_NAMES = {"key": "API key", "batch": "batch job", "alert_rule": "alert rule"}


_LOWER_SCOPE = {Scope.admin: Scope.write, Scope.write: Scope.read, Scope.read: Scope.read}


def _key_reused(path: str, method: str) -> dict[str, Any]:
    """The 409 of an Idempotency-Key sent first with another request (app.core.idempotency)."""
    message = (f"this key was first used for another request (POST /train with a different "
               f"body); {method} {path} with this body needs a new key")
    loc: list[str | int] = ["header", "Idempotency-Key"]
    error = {"loc": loc, "field": "Idempotency-Key", "message": message}
    return _problem(409, path, f"Idempotency-Key: {message}", errors=[error])


def _registry_not_found(op_id: str, path: str) -> dict[str, Any] | None:
    """The 404 of a route that names a registered model, version or alias (or refers to one)."""
    if op_id in _REGISTRY_NOT_FOUND:
        return _problem(404, _instance(path, 1), _REGISTRY_NOT_FOUND[op_id])
    if "{name}" in path:
        return _problem(404, path.replace("{name}", "nope"), "registered model 'nope' not found")
    return None


def error_example(
    status: int, path: str, op: dict[str, Any], method: str = "GET", needed: Scope | None = None
) -> dict[str, Any]:
    """A true problem+json example of ``status`` for the operation ``op`` at ``path``
    (``needed``: the scope the operation needs, from ``app.routers``)."""
    op_id = op.get("operationId", "")
    match = _ID_PARAM.search(path)
    kind = match.group(1) if match else None
    if status == 404 and (named := _registry_not_found(op_id, path)):
        return named
    if status == 404 and kind:
        name = _KIND_NAMES.get(kind, kind)
        return _problem(404, _instance(path, MISSING_ID), f"{name} {MISSING_ID} not found")
    if status == 401:  # the answers' own constructors (app.auth.gate): type and title agree
        return _from_problem(
            gate.unauthorized("invalid or revoked API key", error="invalid_token"), path
        )
    if status == 403 and needed is not None:
        held = Principal(key_id=1, name="ci", scope=_LOWER_SCOPE[needed])
        return _from_problem(gate.forbidden(held, needed, method, path), path)
    if status == 409 and any(p.get("name") == "Idempotency-Key" for p in op.get("parameters", [])):
        return _key_reused(path, method)
    if status == 409:
        template = _CONFLICTS.get(op_id, _EXPERIMENT_CONFLICT if kind == "experiment" else None)
        if template:
            return _problem(409, _instance(path, 1), template.format(id=1))
    if status == 413 and op_id in _TOO_LARGE:
        detail, extra = _TOO_LARGE[op_id]
        return _problem(413, path, detail, **extra)
    if status == 422 and (invalid := _unprocessable(path, op, op_id, kind)):
        return invalid
    if status == 501 and op_id == "export_model":
        from app.export.service import ONNX_MISSING  # (imports the models' service)

        return _problem(501, path, ONNX_MISSING)
    if status == 503:
        return _problem(
            503, path, "database schema at ['0001'], expected ['0002']: run `msvmav migrate`"
        )
    return _problem(status, path, HTTPStatus(status).description or HTTPStatus(status).phrase)


def _unprocessable(
    path: str, op: dict[str, Any], op_id: str, kind: str | None
) -> dict[str, Any] | None:
    """The 422 example of an operation: its own, a path id that is no integer, or a limit."""
    if op_id == "create_dataset":  # a parse error: names the option, row and column
        error = {"loc": ["body", "label"], "field": "label", "message": _LABEL_NOT_FOUND}
        place = {"row": None, "column": "Klass"}
        return {
            **_problem(422, path, f"label: {_LABEL_NOT_FOUND}"),
            "type": TYPE_BASE + "ingest-error",
            "title": "Unprocessable Data",
            "errors": [{**error, **place}],
            "field": "label",
            **place,
        }
    if op_id in _INVALID_BODY:
        loc, message, extra = _INVALID_BODY[op_id]
        return _invalid(path, loc, message, **extra)
    if kind:
        param = f"{kind}_id"
        # app.core.ids.check_ids answers it before pydantic parses the parameter
        return _invalid(_instance(path, "abc"), ["path", param], NOT_AN_ID)
    if any(p.get("name") == "limit" for p in op.get("parameters", [])):
        return _invalid(
            path,
            ["query", "limit"],
            "Input should be less than or equal to 100",
            type="less_than_equal",
            input="1000",
        )
    return None
