"""The OpenAPI document: FastAPI's, with every error answer documented as RFC 9457
problem+json (one true example per operation and status, ``app.error_examples``) instead of
FastAPI's default ``HTTPValidationError``."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.auth.keys import Scope
from app.core import problems
from app.core.idempotency import HEADER as IDEMPOTENCY_HEADER
from app.core.ids import MAX_DB_ID
from app.error_examples import error_example
from app.registry.references import (
    NAME_PATTERN,
    OPENAPI_NAME_PATTERN,
    OPENAPI_REFERENCE_PATTERN,
)
from app.routers import operation_scopes

# Documented on every operation with a request body.
BODY_ERRORS = {
    "400": "Malformed body: not parseable as JSON or as multipart/form-data",
    "413": "Body larger than MSVMAV_MAX_JSON_BYTES (JSON) or MSVMAV_MAX_UPLOAD_BYTES (upload)",
    "422": "Invalid input: the `errors` list names each field (and row/column of a file)",
}

_KEY_REUSED = "Idempotency-Key already used for a different request"
_UNKNOWN = "Not found: the resource, or what a field names (`errors` names the field)"


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
            if names_a_reference(op, schema):
                op.setdefault("responses", {}).setdefault("404", {"description": _UNKNOWN})
            if any(p.get("name") == IDEMPOTENCY_HEADER for p in op.get("parameters", [])):
                op.setdefault("responses", {}).setdefault("409", {"description": _KEY_REUSED})
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
    state_parameter_rules(schema)
    forms_without_null(schema)
    state_field_rules(schema)
    json_without_nul(schema)
    app.openapi_schema = schema
    return schema


FORM_MEDIA_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")
# What the service checks of these path parameters (app.registry.references.parse, check_name;
# app.core.ids.check_ids), stated where FastAPI's document has a bare string or integer.
_PATH_STRINGS = {
    "name": {"pattern": f"^{OPENAPI_NAME_PATTERN}$", "maxLength": 100},
    "alias": {"pattern": f"^{OPENAPI_NAME_PATTERN}$", "maxLength": 100},
    "model_ref": {"pattern": OPENAPI_REFERENCE_PATTERN, "maxLength": 213},
}
_ID_RANGE = {"minimum": 1, "maximum": MAX_DB_ID}


def state_parameter_rules(schema: dict[str, Any]) -> None:
    """Parameters get the rules their checks apply: the registry's name and reference patterns
    on ``name``, ``alias`` and ``model_ref`` in a path, the id range on every ``*_id`` integer
    (a query id outside it is a 422, ``app.core.ids``). The v2 protocol's paths keep their own
    (``model_name`` is not among these)."""
    for item in schema.get("paths", {}).values():
        for op in item.values():
            for param in op.get("parameters", []):
                target = param.get("schema", {})
                if param["in"] == "path" and param["name"] in _PATH_STRINGS:
                    target.update(_PATH_STRINGS[param["name"]])
                elif param["in"] == "query" and param["name"] == "alias":
                    for branch in target.get("anyOf", [target]):
                        if branch.get("type") == "string":
                            branch["pattern"] = f"^{NAME_PATTERN}$"
                elif param["name"].endswith("_id") and param["in"] in ("path", "query"):
                    for branch in target.get("anyOf", [target]):
                        if branch.get("type") == "integer":
                            branch.update(_ID_RANGE)


def forms_without_null(schema: dict[str, Any]) -> None:
    """A form field has no null (multipart/form-data and urlencoded bodies carry text and
    files): an optional field is one left out, so its ``anyOf [..., null]`` becomes the other
    branch. FastAPI copies the Python ``X | None`` of the parameter; generators then send the
    text ``null``, which the field refuses (an integer, a file). Nor does a form take a field it
    does not name (``additionalProperties`` false)."""
    components = schema.get("components", {}).get("schemas", {})
    for item in schema.get("paths", {}).values():
        for op in item.values():
            content = op.get("requestBody", {}).get("content", {})
            for media_type in FORM_MEDIA_TYPES:
                ref = content.get(media_type, {}).get("schema", {}).get("$ref", "")
                body = components.get(ref.rsplit("/", 1)[-1], {})
                if body:  # an unknown form field is a 422 (app.core.forms)
                    body["additionalProperties"] = False
                for prop in body.get("properties", {}).values():
                    branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"]
                    if len(branches) == 1 and len(prop["anyOf"]) == 2:
                        del prop["anyOf"]
                        prop.update(branches[0])


# Fields of a body of which exactly one, or at most one, is given, or which go together: what the
# services check (app.predict.target.target_of, app.batch.service, app.predict.evaluation,
# app.predict.leaderboard, app.monitoring.feedback, app.alerts.service, app.models.decisions),
# stated in the document as JSON Schema (a field "given" is present and not null).
_EXACTLY_ONE = {
    "PredictRequest": [("model_id", "model")],
    "Body_predict_file": [("model_id", "model")],
    "Body_create_batch_job": [("model_id", "model"), ("file", "dataset_id")],
    "FeedbackRequest": [("model_id", "model")],
    "AlertRuleCreate": [("model_id", "model")],
    "LeaderboardRequest": [("models", "dataset_id")],
    "Body_evaluate_model": [("dataset_id", "file")],
    "Body_evaluate_model_png": [("dataset_id", "file")],
    "Body_evaluate_model_svg": [("dataset_id", "file")],
}
_AT_MOST_ONE = {
    "PredictRequest": [("rule", "threshold")],
    "Body_predict_file": [("rule", "threshold")],
    "Body_create_batch_job": [("rule", "threshold")],
    "LeaderboardRequest": [("cost_fp", "cost_matrix"), ("cost_fn", "cost_matrix")],
}
_TOGETHER = {"LeaderboardRequest": [("cost_fp", "cost_fn")]}


def _given(name: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


# metric expected_cost needs a cost rule (app.predict.leaderboard): cost_fp (with cost_fn) or
# cost_matrix given
_NOT_EXPECTED_COST = {"not": {"required": ["metric"],
                              "properties": {"metric": {"const": "expected_cost"}}}}
_COST_RULE = {"LeaderboardRequest": [
    {"anyOf": [_NOT_EXPECTED_COST, _given("cost_fp"), _given("cost_matrix")]}]}


# rows=holdout scores the model's own dataset's hold-out: not a file (app.predict.evaluation)
_HOLDOUT_OF_A_FILE = {"not": {"required": ["file", "rows"],
                              "properties": {"rows": {"const": "holdout"}}}}
_EVALUATE_BODIES = ("Body_evaluate_model", "Body_evaluate_model_png", "Body_evaluate_model_svg")
#: Body fields that hold a model reference (app.registry.references.parse)
REFERENCE_FIELDS = ("model",)


#: Body fields that hold a registered model's or an alias's name (app.registry.service.check_name)
NAME_FIELDS = ("alias", "register_as")


def _state_references(body: dict[str, Any]) -> None:
    patterns = {**dict.fromkeys(REFERENCE_FIELDS, OPENAPI_REFERENCE_PATTERN),
                **dict.fromkeys(NAME_FIELDS, f"^{OPENAPI_NAME_PATTERN}$")}
    for name, pattern in patterns.items():
        prop = body.get("properties", {}).get(name, {})
        for branch in prop.get("anyOf", [prop]):
            if branch.get("type") == "string":
                branch["pattern"] = pattern
    models = body.get("properties", {}).get("models", {})  # a list of references
    for branch in models.get("anyOf", [models]):
        if branch.get("type") == "array" and branch.get("items", {}).get("type") == "string":
            branch["items"]["pattern"] = OPENAPI_REFERENCE_PATTERN


def _body_name(op: dict[str, Any]) -> str:
    for content in op.get("requestBody", {}).get("content", {}).values():
        return content.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
    return ""


def _request_body(op: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The component schema of ``op``'s request body (the first media type's), or {}."""
    components = schema.get("components", {}).get("schemas", {})
    for content in op.get("requestBody", {}).get("content", {}).values():
        ref = content.get("schema", {}).get("$ref", "")
        return components.get(ref.rsplit("/", 1)[-1], {})
    return {}


def _is_reference(name: str) -> bool:
    return name.endswith(("_id", "_ids")) or name in (*REFERENCE_FIELDS, "models",
                                                      "registered_model")


def names_a_reference(op: dict[str, Any], schema: dict[str, Any]) -> bool:
    """``op`` takes an id or model reference in its query or body: one naming nothing stored
    is a 404 naming the field (app.core.problems.unknown)."""
    query = [p["name"] for p in op.get("parameters", []) if p["in"] == "query"]
    return any(map(_is_reference, [*query, *_request_body(op, schema).get("properties", {})]))


def state_field_rules(schema: dict[str, Any]) -> None:
    """Each body's exactly-one, at-most-one and together rules as ``allOf`` members: ``oneOf``
    of the two fields given, ``not`` both given, and each given only with the other; the
    reference pattern on a request body's ``model``."""
    components = schema.get("components", {}).get("schemas", {})
    for item in schema.get("paths", {}).values():
        for op in item.values():
            body = _request_body(op, schema)
            _state_references(body)
            if body and body is components.get(_body_name(op)) and _body_name(op) in _EXACTLY_ONE:
                op["requestBody"]["required"] = True  # one of its fields must be given
    for name in _EVALUATE_BODIES:
        if name in components:
            components[name]["allOf"] = [*components[name].get("allOf", []), _HOLDOUT_OF_A_FILE]
    for name in {*_EXACTLY_ONE, *_AT_MOST_ONE, *_TOGETHER}:
        body = components.get(name)
        if body is None:
            continue
        rules = [{"oneOf": [_given(a), _given(b)]} for a, b in _EXACTLY_ONE.get(name, [])]
        rules += [{"not": {"allOf": [_given(a), _given(b)]}} for a, b in _AT_MOST_ONE.get(name, [])]
        for a, b in _TOGETHER.get(name, []):
            rules += [{"anyOf": [{"not": _given(a)}, _given(b)]},
                      {"anyOf": [{"not": _given(b)}, _given(a)]}]
        rules += _COST_RULE.get(name, [])
        body["allOf"] = [*body.get("allOf", []), *rules]


# No string or key of a JSON body holds a NUL, at any depth (app.core.validation.check_request:
# PostgreSQL's text cannot hold one); stated on the JSON request bodies' schemas, their free-form
# values ({}) made a JSON value of the same rule (JSON_WITHOUT_NUL, recursive).
WITHOUT_NUL = "^[^\\u0000]*$"
JSON_WITHOUT_NUL = "JsonWithoutNul"
_JSON_VALUE_REF = {"$ref": f"#/components/schemas/{JSON_WITHOUT_NUL}"}
_JSON_VALUE = {
    "description": "Any JSON value without a NUL (U+0000) in a string or key",
    "anyOf": [
        {"type": "string", "pattern": WITHOUT_NUL},
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": _JSON_VALUE_REF},
        {"type": "object", "propertyNames": {"pattern": WITHOUT_NUL},
         "additionalProperties": _JSON_VALUE_REF},
    ],
}


def json_without_nul(schema: dict[str, Any]) -> None:
    """Every JSON request body's strings get the no-NUL pattern (unless a pattern, format,
    enum or const already rules NUL out), its free-form objects' keys too (``propertyNames``),
    and each value of any type (``{}``, ``additionalProperties: true``) is a JSON value
    without NUL."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components[JSON_WITHOUT_NUL] = copy.deepcopy(_JSON_VALUE)
    seen: set[str] = {JSON_WITHOUT_NUL}
    for item in schema.get("paths", {}).values():
        for op in item.values():
            content = op.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                _without_nul(content["application/json"].get("schema", {}), components, seen)


def _any_value(node: Any) -> bool:
    return node is True or node == {}


def _without_nul(node: dict[str, Any], components: dict[str, Any], seen: set[str]) -> None:
    ref = node.get("$ref", "")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            _without_nul(components.get(name, {}), components, seen)
        return
    if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & set(node):
        node["pattern"] = WITHOUT_NUL
    extra = node.get("additionalProperties")
    if (node.get("type") == "object" or extra is not None) and extra is not False:
        node.setdefault("propertyNames", {"pattern": WITHOUT_NUL})
        if extra is None or _any_value(extra):
            node["additionalProperties"] = dict(_JSON_VALUE_REF)
    if node.get("type") == "array" and "items" not in node and "prefixItems" not in node:
        node["items"] = dict(_JSON_VALUE_REF)
    children = [(node, key) for key in ("items", "additionalProperties") if key in node]
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):  # not "not": its rule would flip
        children += [(node[key], i) for i in range(len(node.get(key, [])))]
    children += [(node["properties"], name) for name in node.get("properties", {})]
    for parent, key in children:
        child = parent[key]
        if _any_value(child) or (isinstance(child, dict) and child and set(child) <= _ANNOTATIONS):
            parent[key] = {**(child if isinstance(child, dict) else {}), **_JSON_VALUE_REF}
        elif isinstance(child, dict):
            _without_nul(child, components, seen)


_ANNOTATIONS = {"title", "description", "examples", "default"}
