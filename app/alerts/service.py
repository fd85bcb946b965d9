"""Alert rules: create (the target checked now), list, read, change, delete."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.alerts.orm import AlertRule
from app.alerts.schemas import AlertRuleCreate, AlertRuleUpdate
from app.core.problems import invalid, not_found
from app.models import service as models
from app.monitoring import feedback


def create(session: Session, body: AlertRuleCreate) -> AlertRule:
    """A new rule, committed; 422 naming ``model_id`` without exactly one target, 404 for a
    stored model or reference that names nothing now."""
    if (body.model_id is None) == (body.model is None):
        raise invalid(["body", "model_id"], "give model_id or model (a registry reference), "
                      "exactly one")
    if body.model_id is not None:
        models.get_or_raise(session, body.model_id, ["body", "model_id"])
    else:
        feedback.resolve_reference(session, body.model, ["body", "model"])
    rule = AlertRule(**body.model_dump())
    session.add(rule)
    session.commit()
    return rule


def get_or_raise(session: Session, rule_id: int) -> AlertRule:
    rule = session.get(AlertRule, rule_id)
    if rule is None:
        raise not_found("alert rule", rule_id)
    return rule


def list_all(session: Session) -> list[AlertRule]:
    return list(session.scalars(select(AlertRule).order_by(AlertRule.id)))


def update(session: Session, rule_id: int, body: AlertRuleUpdate) -> AlertRule:
    """The fields given changed (null: left as is), committed."""
    rule = get_or_raise(session, rule_id)
    for field, value in body.model_dump(exclude_none=True).items():
        setattr(rule, field, value)
    session.commit()
    return rule


def delete(session: Session, rule_id: int) -> None:
    session.delete(get_or_raise(session, rule_id))
    session.commit()
