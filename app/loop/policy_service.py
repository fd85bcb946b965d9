"""Retraining policies' data functions: set (create or replace the config; the state goes on),
read with the challenger's record now, delete."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.alerts.orm import AlertRule
from app.core.orm import utcnow
from app.core.problems import invalid, missing
from app.core.runtime import Runtime
from app.loop import judge
from app.loop.orm import RetrainPolicy
from app.loop.schemas import PolicyConfig
from app.registry import service as registry


def put(session: Session, name: str, config: PolicyConfig) -> RetrainPolicy:
    """Set registered model ``name``'s policy (committed): 422 naming an alert rule that does
    not exist. A new policy starts idle, its alert rules' earlier fires seen, its label count
    from now."""
    registered = registry.get_or_raise(session, name, lock=True)
    seen = {}
    for i, rule_id in enumerate(config.trigger.alert_rule_ids):
        rule = session.get(AlertRule, rule_id)
        if rule is None:
            raise invalid(["body", "trigger", "alert_rule_ids", i],
                          f"alert rule {rule_id} not found")
        seen[str(rule_id)] = rule.last_fired_at.isoformat() if rule.last_fired_at else None
    policy = session.get(RetrainPolicy, registered.id)
    now = utcnow()
    if policy is None:
        policy = RetrainPolicy(registered_model_id=registered.id, created_at=now, state={
            "phase": "idle", "alerts_seen": {k: v for k, v in seen.items() if v},
            "labels_since": now.isoformat()})
        session.add(policy)
    else:
        state = dict(policy.state)
        known = dict(state.get("alerts_seen") or {})
        for key, fired in seen.items():  # a rule new to the policy: its old fires seen
            if key not in known and fired:
                known[key] = fired
        state["alerts_seen"] = known
        policy.state = state
    policy.config = config.model_dump(mode="json")
    policy.enabled = config.enabled
    policy.updated_at = now
    session.commit()
    return policy


def get_or_raise(session: Session, name: str) -> RetrainPolicy:
    registered = registry.get_or_raise(session, name)
    policy = session.get(RetrainPolicy, registered.id)
    if policy is None:
        raise missing(f"registered model {name!r} has no retraining policy")
    return policy


def delete(session: Session, name: str) -> None:
    session.delete(get_or_raise(session, name))
    session.commit()


def view(session: Session, runtime: Runtime, name: str,
         policy: RetrainPolicy) -> dict[str, Any]:
    """The policy, its state and the challenger's record beside production's now (shadowing:
    the challenger against production; probation: the replaced version against the promoted
    one; else the last record the policy kept)."""
    state = dict(policy.state)
    config = PolicyConfig.model_validate(policy.config)
    registered = registry.get_or_raise(session, name)
    aliases = registry.aliases_of(session, registered)
    rec = state.get("record")
    phase = state.get("phase")
    pair = None
    if phase == "shadowing":
        pair = (state.get("challenger_version"), aliases.get(config.judge.production_alias),
                state.get("shadow_since"))
    elif phase == "probation":
        pair = (state.get("previous_version"), state.get("promoted_version"),
                state.get("probation_since"))
    if pair is not None and None not in pair:
        found = judge.pair_of(session, registered, config.judge.production_alias, pair[0],
                              pair[1], datetime.fromisoformat(pair[2]))
        if found is not None:
            rec = judge.record(session, runtime, found)
    session.commit()
    return {"name": name, "enabled": policy.enabled, "config": config, "state": state,
            "record": rec, "updated_at": policy.updated_at}
