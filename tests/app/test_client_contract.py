"""The client's types (msvmav_client.types) against the service's OpenAPI document: for every
route the client wraps, each field the route's response schema carries is in the client's
TypedDict and each field of the TypedDict is in the schema, nested types included. A field
added on either side alone fails here."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from msvmav_client import types as t

# (client type, method, route, exact): the client type of each wrapped route's 2xx answer.
# exact=False: the route answers a part of the type (JobOut is JobDetail's first fields).
WRAPPED = [
    (t.Dataset, "post", "/datasets", True),
    (t.Dataset, "get", "/datasets/{dataset_id}", True),
    (t.Page, "get", "/datasets", True),
    (t.JobInfo, "get", "/jobs/{job_id}", True),
    (t.JobInfo, "post", "/train", False),
    (t.JobInfo, "post", "/jobs/{job_id}/cancel", False),
    (t.Page, "get", "/jobs", True),
    (t.ModelInfo, "get", "/models/{model_id}", True),
    (t.ModelInfo, "post", "/models/import", True),
    (t.Page, "get", "/models", True),
    (t.Margins, "get", "/models/{model_id}/margins", True),
    (t.PredictResult, "post", "/predict", True),
    (t.PredictResult, "post", "/predict/file", True),
    (t.Evaluation, "post", "/models/{model_ref}/evaluate", True),
    (t.RegisteredModel, "get", "/registered-models/{name}", True),
    (t.Page, "get", "/registered-models", True),
    (t.Page, "get", "/registered-models/{name}/history", True),
    (t.VersionCreated, "post", "/registered-models/{name}/versions", True),
    (t.Alias, "put", "/registered-models/{name}/aliases/{alias}", True),
    (t.Alias, "post", "/registered-models/{name}/aliases/{alias}/rollback", True),
]


@pytest.fixture
def spec(app) -> dict:
    return app.openapi()


def _resolve(spec: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _nested_object(spec: dict, schema: dict) -> dict | None:
    """The object schema inside a field's schema (through null unions and arrays), if any."""
    schema = _resolve(spec, schema)
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return _nested_object(spec, option)
    if schema.get("type") == "array":
        return _nested_object(spec, schema.get("items", {}))
    return schema if "properties" in schema else None


def _nested_type(annotation: Any) -> type | None:
    """The TypedDict inside a field's annotation (through unions and lists), if any."""
    if typing.is_typeddict(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_type(arg)
        if found is not None:
            return found
    return None


def _differences(spec: dict, cls: type, schema: dict, exact: bool, where: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    fields = schema["properties"]
    out = [f"{where}: the server sends {k!r}, the client's {cls.__name__} lacks it"
           for k in fields if k not in hints]
    if exact:
        out += [f"{where}: the client's {cls.__name__} has {k!r}, the server never sends it"
                for k in hints if k not in fields]
    for name, annotation in hints.items():
        inner = _nested_type(annotation)
        if inner is None or name not in fields:
            continue
        nested = _nested_object(spec, fields[name])
        if nested is None:
            out.append(f"{where}.{name}: the client types it {inner.__name__}, the server "
                       "gives no object schema")
        else:
            out += _differences(spec, inner, nested, exact, f"{where}.{name}")
    return out


def _response_schema(spec: dict, method: str, route: str) -> dict:
    responses = spec["paths"][route][method]["responses"]
    (ok,) = [r for code, r in responses.items() if code.startswith("2")][:1]
    return _resolve(spec, ok["content"]["application/json"]["schema"])


@pytest.mark.parametrize(("cls", "method", "route", "exact"), WRAPPED,
                         ids=[f"{m} {r}" for _, m, r, _ in WRAPPED])
def test_client_types_match_the_openapi_document(spec, cls, method, route, exact):
    schema = _response_schema(spec, method, route)
    assert _differences(spec, cls, schema, exact, f"{method.upper()} {route}") == []


def test_every_client_type_is_checked():
    """A TypedDict added to msvmav_client.types is checked against some route (nested ones
    through the type that holds them)."""
    checked = {cls for cls, *_ in WRAPPED}
    nested = set()
    for cls in checked:
        for annotation in typing.get_type_hints(cls).values():
            inner = _nested_type(annotation)
            if inner is not None:
                nested.add(inner)
                nested |= {_nested_type(a) for a in typing.get_type_hints(inner).values()} - {None}
    declared = {v for v in vars(t).values() if typing.is_typeddict(v)}
    assert declared <= checked | nested


class _PredictionWithoutClipped(typing.TypedDict, total=False):
    id: str | int
    label: Any


class _PredictResultWithoutClipped(t.PredictResult, total=False):
    predictions: list[_PredictionWithoutClipped]  # type: ignore[misc]


def test_the_drift_check_finds_a_missing_field(spec):
    """The check itself: a client type without the server's ``clipped`` fails it."""
    schema = _response_schema(spec, "post", "/predict")
    found = _differences(spec, _PredictResultWithoutClipped, schema, True, "POST /predict")
    assert any("'clipped'" in f and "lacks" in f for f in found), found
