"""The alert rules' and webhooks' request and answer bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, UrlConstraints

from app.core.ids import DbId, Whole, whole_in

Metric = Literal[
    "estimated_accuracy", "atc_accuracy", "realised_accuracy", "accuracy_gap",
    "drift_statistic", "drift_p_value", "clipped_share", "margin_density",
    "margin_density_change", "unreliable", "rows",
]
Comparison = Literal["lt", "le", "gt", "ge"]
Event = Literal["alert", "alias_moved", "version_registered"]
MAX_WINDOW_SECONDS = 31 * 86400
MAX_COOLDOWN_SECONDS = 366 * 86400
# A webhook's URL: browsers' and proxies' common bound (RFC 9110 recommends at least 8,000)
MAX_URL_CHARS = 2048

_RULE_EXAMPLE = {"model": "wdbc@production", "metric": "estimated_accuracy",
                 "comparison": "lt", "level": 0.9, "window_seconds": 3600,
                 "cooldown_seconds": 3600}
_METRIC = (
    "What the window's report gives (docs/monitoring.md): estimated_accuracy "
    "(performance_estimate.estimate), atc_accuracy, realised_accuracy, accuracy_gap, "
    "drift_statistic and drift_p_value (the decision values' KS test), clipped_share "
    "(live.clipped_fraction), margin_density (the live share inside the margin band), "
    "margin_density_change, unreliable (1 when the estimate's verdict is unreliable, else 0), "
    "rows (live.n)"
)


class AlertRuleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"examples": [_RULE_EXAMPLE]})

    name: str = Field("", max_length=100)
    model_id: DbId | None = Field(None, description="A stored model; or `model`")
    model: str | None = Field(
        None, max_length=220, description="A registry reference (`name@alias`, `name/2`, "
        "`name`), resolved to the stored model it names at each window")
    metric: Metric = Field(description=_METRIC)
    comparison: Comparison = Field(description="The rule crosses when metric <comparison> level")
    level: float = Field(allow_inf_nan=False)
    window_seconds: Whole = Field(3600, ge=1, le=MAX_WINDOW_SECONDS, description=(
        "The window's length: windows are [k·w, (k+1)·w) in UTC seconds since the epoch, each "
        "evaluated once after it ends"))
    cooldown_seconds: Whole = Field(3600, ge=0, le=MAX_COOLDOWN_SECONDS, description=(
        "After a fire, the rule does not fire again for this long"))
    min_rows: Whole = Field(1, ge=1, le=2**31 - 1, description=(
        "A window with fewer logged rows never crosses"))
    enabled: bool = True


class AlertRuleUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"examples": [{"level": 0.85}]})

    name: str | None = Field(None, max_length=100)
    metric: Metric | None = None
    comparison: Comparison | None = None
    level: float | None = Field(None, allow_inf_nan=False)
    window_seconds: whole_in(1, MAX_WINDOW_SECONDS) | None = None
    cooldown_seconds: whole_in(0, MAX_COOLDOWN_SECONDS) | None = None
    min_rows: whole_in(1, 2**31 - 1) | None = None
    enabled: bool | None = None


RULE_OUT_EXAMPLE = {
    "id": 1, "name": "", "model_id": None, "model": "wdbc@production",
    "metric": "estimated_accuracy", "comparison": "lt", "level": 0.9, "window_seconds": 3600,
    "cooldown_seconds": 3600, "min_rows": 1, "enabled": True,
    "created_at": "2026-12-01T09:12:00Z", "evaluated_until": "2026-12-02T04:00:00Z",
    "last_fired_at": None,
    "last_window": {"since": "2026-12-02T03:00:00+00:00", "until": "2026-12-02T04:00:00+00:00",
                    "model_id": 1, "values": {"estimated_accuracy": 0.962, "rows": 570.0}},
}
WEBHOOK_EXAMPLE = {"id": 1, "url": "https://hooks.example.com/msvmav",
                   "events": ["alert", "alias_moved"], "description": "",
                   "created_at": "2026-12-01T09:15:00Z"}
DELIVERY_EXAMPLE = {
    "id": 3, "webhook_id": 1, "event": "alert", "rule_id": 1, "status": "delivered",
    "attempts": 2, "response_code": 200,
    "history": [{"at": "2026-12-02T04:00:01.2+00:00", "status_code": 500, "error": None},
                {"at": "2026-12-02T04:00:02.3+00:00", "status_code": 200, "error": None}],
    "body": '{"id":"5f0c…","type":"alert","created_at":"2026-12-02T04:00:01+00:00","data":{}}',
    "next_attempt_at": "2026-12-02T04:00:02.2Z", "created_at": "2026-12-02T04:00:01.1Z",
    "delivered_at": "2026-12-02T04:00:02.3Z",
}


class AlertRuleOut(BaseModel):
    model_config = ConfigDict(from_attributes=True, protected_namespaces=(),
                              json_schema_extra={"examples": [RULE_OUT_EXAMPLE]})

    id: int
    name: str
    model_id: int | None
    model: str | None
    metric: str
    comparison: str
    level: float
    window_seconds: int
    cooldown_seconds: int
    min_rows: int
    enabled: bool
    created_at: datetime
    evaluated_until: datetime | None = Field(description="The end of the last window evaluated")
    last_fired_at: datetime | None
    last_window: dict[str, Any] | None = Field(description=(
        "The last evaluated window: since, until, model_id, and values (every metric)"))


# What AnyHttpUrl takes, stated beside the document's ``format: uri`` (which allows any scheme):
# http or https, case-insensitive, and a host
HTTP_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+"


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"url": "https://hooks.example.com/msvmav", "events": ["alert", "alias_moved"]}]})

    url: Annotated[AnyHttpUrl, UrlConstraints(max_length=MAX_URL_CHARS)] = Field(
        description=f"http or https URL that takes a POST per event (at most {MAX_URL_CHARS} "
        "characters)", json_schema_extra={"pattern": HTTP_URL_PATTERN})
    events: list[Event] = Field(min_length=1, max_length=3)
    description: str = Field("", max_length=1000)


class WebhookOut(BaseModel):
    model_config = ConfigDict(from_attributes=True,
                              json_schema_extra={"examples": [WEBHOOK_EXAMPLE]})

    id: int
    url: str
    events: list[str]
    description: str
    created_at: datetime


class WebhookCreated(WebhookOut):
    model_config = ConfigDict(json_schema_extra={"examples": [
        WEBHOOK_EXAMPLE | {"secret": "whsec_" + "x" * 43}]})

    secret: str = Field(description="The signing secret: shown only in this answer")


class DeliveryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True,
                              json_schema_extra={"examples": [DELIVERY_EXAMPLE]})

    id: int
    webhook_id: int
    event: str
    rule_id: int | None
    status: str = Field(description="pending, sending, delivered or failed")
    attempts: int
    response_code: int | None = Field(description="The last attempt's HTTP status")
    history: list[dict[str, Any]] = Field(description="Every attempt: at, status_code, error")
    body: str = Field(description="The JSON text sent (and signed)")
    next_attempt_at: datetime
    created_at: datetime
    delivered_at: datetime | None
