"""The client (msvmav_client) against the service's OpenAPI document: every operation of the
document is wrapped by a client method (or is one of the few served for other clients: the Open
Inference Protocol's, MLflow's and the web interface's own), and for every route the client
wraps, each field the route's response schema carries is in the client's TypedDict and each
field of the TypedDict is in the schema, nested types included. A route or a field added on one
side alone fails here."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from msvmav_client import Client, Job
from msvmav_client import types as t

#: (METHOD, route) -> the client method that calls it; tests/test_client.py runs each against a
#: live server.
CALLED_BY = {
    ("POST", "/predict"): "Client.predict",  # and predict_proba
    ("POST", "/predict/file"): "Client.predict_file",
    ("POST", "/models/{model_ref}/threshold"): "Client.set_threshold",
    ("POST", "/models/{model_ref}/threshold.png"): "Client.set_threshold",
    ("POST", "/models/{model_ref}/threshold.svg"): "Client.set_threshold",
    ("POST", "/datasets"): "Client.upload",
    ("GET", "/datasets"): "Client.datasets",
    ("POST", "/datasets/references"): "Client.register_reference",
    ("GET", "/datasets/{dataset_id}"): "Client.dataset",
    ("DELETE", "/datasets/{dataset_id}"): "Client.delete_dataset",
    ("GET", "/datasets/{dataset_id}/profile"): "Client.profile",
    ("POST", "/train"): "Client.train",
    ("GET", "/jobs"): "Client.jobs",
    ("GET", "/jobs/{job_id}"): "Client.job",  # and Job.refresh, Job.wait
    ("POST", "/jobs/{job_id}/cancel"): "Job.cancel",
    ("POST", "/batch-predictions"): "Client.batch_predict",
    ("GET", "/batch-predictions/{batch_id}/result"): "Client.batch_result",
    ("GET", "/batch-predictions/{batch_id}/errors"): "Client.batch_errors",
    ("GET", "/models"): "Client.models",
    ("GET", "/models/{model_id}"): "Client.model",
    ("DELETE", "/models/{model_id}"): "Client.delete_model",
    ("GET", "/models/{model_id}/margins"): "Client.margins",
    ("GET", "/models/{model_id}/margins.png"): "Client.margins_figure",
    ("GET", "/models/{model_id}/margins.svg"): "Client.margins_figure",
    ("POST", "/registered-models"): "Client.create_registered_model",  # and register
    ("GET", "/registered-models"): "Client.registered_models",
    ("GET", "/registered-models/{name}"): "Client.registered_model",
    ("PATCH", "/registered-models/{name}"): "Client.update_registered_model",
    ("DELETE", "/registered-models/{name}"): "Client.delete_registered_model",
    ("POST", "/registered-models/{name}/versions"): "Client.register",
    ("DELETE", "/registered-models/{name}/versions/{version}"): "Client.delete_version",
    ("PUT", "/registered-models/{name}/aliases/{alias}"): "Client.set_alias",
    ("PATCH", "/registered-models/{name}/aliases/{alias}"): "Client.set_canary",
    ("DELETE", "/registered-models/{name}/aliases/{alias}"): "Client.delete_alias",
    ("POST", "/registered-models/{name}/aliases/{alias}/rollback"): "Client.rollback",
    ("GET", "/registered-models/{name}/history"): "Client.history",
    ("POST", "/feedback"): "Client.feedback",
    ("GET", "/models/{model_id}/monitoring"): "Client.monitoring",
    ("GET", "/models/{model_id}/monitoring.png"): "Client.monitoring",
    ("GET", "/registered-models/{name}/monitoring"): "Client.monitoring",
    ("GET", "/registered-models/{name}/monitoring.png"): "Client.monitoring",
    ("PUT", "/registered-models/{name}/shadow"): "Client.start_shadow",
    ("GET", "/registered-models/{name}/shadow"): "Client.shadow",
    ("DELETE", "/registered-models/{name}/shadow"): "Client.stop_shadow",
    ("POST", "/registered-models/{name}/retrain"): "Client.retrain",
    ("PUT", "/registered-models/{name}/policy"): "Client.set_policy",
    ("GET", "/registered-models/{name}/policy"): "Client.policy",
    ("DELETE", "/registered-models/{name}/policy"): "Client.delete_policy",
    ("GET", "/models/{model_ref}/export"): "Client.export",
    ("POST", "/models/import"): "Client.import_bundle",
    ("POST", "/experiments"): "Client.start_experiment",
    ("GET", "/experiments"): "Client.experiments",
    ("GET", "/experiments/{experiment_id}"): "Client.experiment",
    ("GET", "/experiments/{experiment_id}/table.md"): "Client.experiment_table",
    ("GET", "/experiments/{experiment_id}/table.csv"): "Client.experiment_table",
    ("GET", "/experiments/{experiment_id}/margins.png"): "Client.experiment_margins",
    ("GET", "/experiments/{experiment_id}/margins.svg"): "Client.experiment_margins",
    ("POST", "/keys"): "Client.create_key",
    ("GET", "/keys"): "Client.keys",
    ("GET", "/keys/{key_id}"): "Client.key",
    ("DELETE", "/keys/{key_id}"): "Client.revoke_key",
    ("GET", "/metrics"): "Client.metrics",
    ("POST", "/models/{model_ref}/evaluate"): "Client.evaluate",
    ("POST", "/models/{model_ref}/evaluate.png"): "Client.evaluate",
    ("POST", "/models/{model_ref}/evaluate.svg"): "Client.evaluate",
    ("POST", "/models/{model_ref}/explain"): "Client.explain",
    ("GET", "/datasets/{dataset_id}/leaderboard"): "Client.leaderboard",
    ("POST", "/models/leaderboard"): "Client.leaderboard",
    ("POST", "/alert-rules"): "Client.create_alert_rule",
    ("GET", "/alert-rules"): "Client.alert_rules",
    ("GET", "/alert-rules/{alert_rule_id}"): "Client.alert_rule",
    ("PATCH", "/alert-rules/{alert_rule_id}"): "Client.update_alert_rule",
    ("DELETE", "/alert-rules/{alert_rule_id}"): "Client.delete_alert_rule",
    ("POST", "/webhooks"): "Client.create_webhook",
    ("GET", "/webhooks"): "Client.webhooks",
    ("GET", "/webhooks/{webhook_id}"): "Client.webhook",
    ("DELETE", "/webhooks/{webhook_id}"): "Client.delete_webhook",
    ("GET", "/webhook-deliveries"): "Client.webhook_deliveries",
    ("GET", "/livez"): "Client.live",
    ("GET", "/readyz"): "Client.ready",
}
#: Route prefixes served for other clients, with the reason the client does not wrap them.
FOR_OTHER_CLIENTS = {
    "/v2": "the Open Inference Protocol: its stock clients (tritonclient), docs/protocols.md",
    "/ui-api/": "the web interface's own calls (its session and overview)",
}
FOR_OTHER_SUFFIXES = {"/invocations": "MLflow's scoring protocol: MLflow's clients"}

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
    (t.ThresholdResult, "post", "/models/{model_ref}/threshold", True),
    (t.Evaluation, "post", "/models/{model_ref}/evaluate", True),
    (t.RegisteredModel, "get", "/registered-models/{name}", True),
    (t.Page, "get", "/registered-models", True),
    (t.Page, "get", "/registered-models/{name}/history", True),
    (t.VersionCreated, "post", "/registered-models/{name}/versions", True),
    (t.Alias, "put", "/registered-models/{name}/aliases/{alias}", True),
    (t.Alias, "post", "/registered-models/{name}/aliases/{alias}/rollback", True),
    (t.RegisteredModel, "post", "/registered-models", True),
    (t.RegisteredModel, "patch", "/registered-models/{name}", True),
    (t.Dataset, "post", "/datasets/references", True),
    (t.DatasetProfile, "get", "/datasets/{dataset_id}/profile", True),
    (t.JobInfo, "post", "/batch-predictions", False),
    (t.PredictResult, "post", "/models/{model_ref}/explain", True),
    (t.Leaderboard, "get", "/datasets/{dataset_id}/leaderboard", True),
    (t.Leaderboard, "post", "/models/leaderboard", True),
    (t.FeedbackResult, "post", "/feedback", True),
    (t.MonitoringReport, "get", "/models/{model_id}/monitoring", True),
    (t.MonitoringReport, "get", "/registered-models/{name}/monitoring", True),
    (t.ShadowReport, "put", "/registered-models/{name}/shadow", True),
    (t.ShadowReport, "get", "/registered-models/{name}/shadow", True),
    (t.Policy, "put", "/registered-models/{name}/policy", True),
    (t.Policy, "get", "/registered-models/{name}/policy", True),
    (t.Experiment, "post", "/experiments", True),
    (t.Experiment, "get", "/experiments/{experiment_id}", True),
    (t.Page, "get", "/experiments", True),
    (t.KeyCreated, "post", "/keys", True),
    (t.AlertRule, "post", "/alert-rules", True),
    (t.AlertRule, "get", "/alert-rules/{alert_rule_id}", True),
    (t.AlertRule, "patch", "/alert-rules/{alert_rule_id}", True),
    (t.WebhookCreated, "post", "/webhooks", True),
    (t.Webhook, "get", "/webhooks/{webhook_id}", True),
    # a list's items (list[AlertRule], list[Webhook], list[Delivery])
    (t.AlertRule, "get", "/alert-rules", True),
    (t.Webhook, "get", "/webhooks", True),
    (t.Delivery, "get", "/webhook-deliveries", True),
    (t.KeyInfo, "get", "/keys/{key_id}", True),
    (t.Page, "get", "/keys", True),
]


@pytest.fixture
def spec(app) -> dict:
    return app.openapi()


def _for_other_clients(path: str) -> bool:
    return path.startswith(tuple(FOR_OTHER_CLIENTS)) or path.endswith(tuple(FOR_OTHER_SUFFIXES))


def test_the_client_wraps_every_route(spec):
    """Every operation of the OpenAPI document has a client method (the table above names
    it), but those served for other clients; and the table names no route that is gone."""
    operations = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    ours = {op for op in operations if not _for_other_clients(op[1])}
    assert sorted(ours - CALLED_BY.keys()) == [], "routes no client method calls"
    assert sorted(CALLED_BY.keys() - operations) == [], "routes the service no longer has"


@pytest.mark.parametrize("name", sorted(set(CALLED_BY.values())))
def test_each_named_client_method_exists(name):
    owner, method = name.split(".")
    assert callable(getattr({"Client": Client, "Job": Job}[owner], method, None)), name


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
    schema = _resolve(spec, ok["content"]["application/json"]["schema"])
    return _resolve(spec, schema["items"]) if schema.get("type") == "array" else schema


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
