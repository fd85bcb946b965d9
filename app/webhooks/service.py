"""Hooks and deliveries: create, list and delete hooks; ``enqueue`` an event for every hook
that takes it (in the caller's transaction: the event is sent only if the change it reports
commits); the deliveries' listing."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.orm import utcnow
from app.core.problems import not_found
from app.webhooks import signing
from app.webhooks.orm import Webhook, WebhookDelivery

#: What a hook may subscribe to: an alert rule crossing its level, a registry alias moved
#: (set, removed or rolled back), a version registered.
EVENTS = ("alert", "alias_moved", "version_registered")


def create(session: Session, url: str, events: list[str], description: str) -> tuple[Webhook, str]:
    """A new hook (committed) and its secret, shown once."""
    secret = signing.new_secret()
    hook = Webhook(url=url, events=sorted(set(events)), secret=secret, description=description)
    session.add(hook)
    session.commit()
    return hook, secret


def get_or_raise(session: Session, webhook_id: int) -> Webhook:
    hook = session.get(Webhook, webhook_id)
    if hook is None:
        raise not_found("webhook", webhook_id)
    return hook


def list_all(session: Session) -> list[Webhook]:
    return list(session.scalars(select(Webhook).order_by(Webhook.id)))


def delete(session: Session, webhook_id: int) -> None:
    """The hook and its deliveries (cascade)."""
    hook = get_or_raise(session, webhook_id)
    session.execute(WebhookDelivery.__table__.delete().where(
        WebhookDelivery.webhook_id == hook.id))
    session.delete(hook)
    session.commit()


def enqueue(session: Session, event: str, data: dict[str, Any],
            rule_id: int | None = None) -> int:
    """A pending delivery of ``event`` for each hook subscribed to it, added to ``session``
    (flushed, not committed); how many. The body is fixed here: every attempt sends it."""
    hooks = [h for h in session.scalars(select(Webhook)) if event in (h.events or [])]
    if not hooks:
        return 0
    now = utcnow()
    body = json.dumps({"id": uuid.uuid4().hex, "type": event, "created_at": now.isoformat(),
                       "data": data}, separators=(",", ":"), default=str)
    for hook in hooks:
        session.add(WebhookDelivery(webhook_id=hook.id, event=event, rule_id=rule_id, body=body,
                                    status="pending", attempts=0, history=[],
                                    next_attempt_at=now, created_at=now))
    session.flush()
    return len(hooks)


def deliveries(session: Session, webhook_id: int | None, rule_id: int | None,
               limit: int) -> list[WebhookDelivery]:
    """The newest ``limit`` deliveries, newest first, of a hook and/or a rule."""
    stmt = select(WebhookDelivery)
    if webhook_id is not None:
        stmt = stmt.where(WebhookDelivery.webhook_id == webhook_id)
    if rule_id is not None:
        stmt = stmt.where(WebhookDelivery.rule_id == rule_id)
    return list(session.scalars(stmt.order_by(WebhookDelivery.id.desc()).limit(limit)))
