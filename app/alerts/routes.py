"""/alert-rules, /webhooks and /webhook-deliveries: a read key for GET, a write key for the
rules' changes, an admin key for the webhooks' (``hooks_router``: a hook makes the service send
requests to any URL it names, so who may add one is who may create keys)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response, status

from app.alerts import service
from app.alerts.schemas import (
    DELIVERY_EXAMPLE,
    RULE_OUT_EXAMPLE,
    WEBHOOK_EXAMPLE,
    AlertRuleCreate,
    AlertRuleOut,
    AlertRuleUpdate,
    DeliveryOut,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
)
from app.core.deps import SessionDep
from app.core.problems import problem_responses
from app.webhooks import service as webhooks

router = APIRouter(tags=["alerts"])
hooks_router = APIRouter(tags=["alerts"])


def _list_of(example: dict) -> dict:
    """A list answer's documented example: one item."""
    return {200: {"content": {"application/json": {"example": [example]}}}}


_RULE_EXAMPLES = {
    "estimate below 0.9": {
        "summary": "Production's estimated accuracy below 0.9 over an hour",
        "value": {"model": "wdbc@production", "metric": "estimated_accuracy",
                  "comparison": "lt", "level": 0.9, "window_seconds": 3600,
                  "cooldown_seconds": 3600},
    },
    "clipped inputs": {
        "summary": "More than 5 % of a minute's rows out of the training range",
        "value": {"model_id": 1, "metric": "clipped_share", "comparison": "gt", "level": 0.05,
                  "window_seconds": 60, "cooldown_seconds": 900, "min_rows": 20},
    },
}
_HOOK_EXAMPLES = {
    "alerts and alias moves": {
        "summary": "Alerts and alias moves to one receiver",
        "value": {"url": "https://hooks.example.com/msvmav", "events": ["alert", "alias_moved"]},
    },
}


@router.post("/alert-rules", status_code=status.HTTP_201_CREATED, summary="Create an alert rule",
             description="Evaluated on each of its windows as the window ends; a crossing "
             "outside the cool-down is delivered to the webhooks that take `alert` "
             "(docs/monitoring.md). 422 naming the field on bad input.",
             response_model=AlertRuleOut, responses=problem_responses(404, 422))
def create_alert_rule(
    session: SessionDep, response: Response,
    body: Annotated[AlertRuleCreate, Body(openapi_examples=_RULE_EXAMPLES)],
) -> AlertRuleOut:
    rule = service.create(session, body)
    response.headers["Location"] = f"/alert-rules/{rule.id}"
    return AlertRuleOut.model_validate(rule)


@router.get("/alert-rules", summary="List alert rules", response_model=list[AlertRuleOut],
            responses=_list_of(RULE_OUT_EXAMPLE))
def list_alert_rules(session: SessionDep) -> list[AlertRuleOut]:
    return [AlertRuleOut.model_validate(r) for r in service.list_all(session)]


@router.get("/alert-rules/{alert_rule_id}", summary="Get an alert rule",
            response_model=AlertRuleOut, responses=problem_responses(404))
def get_alert_rule(session: SessionDep, alert_rule_id: int) -> AlertRuleOut:
    return AlertRuleOut.model_validate(service.get_or_raise(session, alert_rule_id))


@router.patch("/alert-rules/{alert_rule_id}", summary="Change an alert rule",
              description="The fields given are changed; the others kept.",
              response_model=AlertRuleOut, responses=problem_responses(404, 422))
def update_alert_rule(
    session: SessionDep, alert_rule_id: int,
    body: Annotated[AlertRuleUpdate | None, Body(openapi_examples={
        "level": {"summary": "A new level", "value": {"level": 0.85}}})] = None,
) -> AlertRuleOut:
    changes = body or AlertRuleUpdate()
    return AlertRuleOut.model_validate(service.update(session, alert_rule_id, changes))


@router.delete("/alert-rules/{alert_rule_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete an alert rule", responses=problem_responses(404))
def delete_alert_rule(session: SessionDep, alert_rule_id: int) -> Response:
    service.delete(session, alert_rule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@hooks_router.post("/webhooks", status_code=status.HTTP_201_CREATED, summary="Create a webhook",
             description="Needs an admin key. Answers the hook's signing `secret`: the only "
             "time it is shown. Each delivery is a POST of JSON signed in "
             "`Msvmav-Signature: t=<unix>,v1=<hex "
             "HMAC-SHA256(secret, \"<t>.<body>\")>` (docs/monitoring.md).",
             response_model=WebhookCreated, responses=problem_responses(422))
def create_webhook(
    session: SessionDep, response: Response,
    body: Annotated[WebhookCreate, Body(openapi_examples=_HOOK_EXAMPLES)],
) -> WebhookCreated:
    hook, secret = webhooks.create(session, str(body.url), list(body.events), body.description)
    response.headers["Location"] = f"/webhooks/{hook.id}"
    return WebhookCreated(**WebhookOut.model_validate(hook).model_dump(), secret=secret)


@router.get("/webhooks", summary="List webhooks (never their secrets)",
            response_model=list[WebhookOut], responses=_list_of(WEBHOOK_EXAMPLE))
def list_webhooks(session: SessionDep) -> list[WebhookOut]:
    return [WebhookOut.model_validate(h) for h in webhooks.list_all(session)]


@router.get("/webhooks/{webhook_id}", summary="Get a webhook (without its secret)",
            response_model=WebhookOut, responses=problem_responses(404))
def get_webhook(session: SessionDep, webhook_id: int) -> WebhookOut:
    return WebhookOut.model_validate(webhooks.get_or_raise(session, webhook_id))


@hooks_router.delete("/webhooks/{webhook_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete a webhook and its deliveries (an admin key)",
               responses=problem_responses(404))
def delete_webhook(session: SessionDep, webhook_id: int) -> Response:
    webhooks.delete(session, webhook_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/webhook-deliveries", summary="List webhook deliveries",
            description="Newest first: each event sent to a hook, its attempts and their HTTP "
            "status codes.", response_model=list[DeliveryOut],
            responses={**_list_of(DELIVERY_EXAMPLE), **problem_responses(422)})
def list_deliveries(
    session: SessionDep,
    webhook_id: Annotated[int | None, Query(description="Of this hook")] = None,
    rule_id: Annotated[int | None, Query(description="Of this alert rule")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[DeliveryOut]:
    rows = webhooks.deliveries(session, webhook_id, rule_id, limit)
    return [DeliveryOut.model_validate(d) for d in rows]
