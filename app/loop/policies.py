"""The retraining policies' evaluator: one step of each enabled policy per round of the alert
evaluator (``app.alerts.evaluator``: only API processes evaluate; ``register`` adds this step
to its rounds at the app's start).

A round claims each policy by a conditional UPDATE of its ``evaluated_until`` (only from an
earlier round's time to this one's), as the alert rules are claimed, so across API processes
one process steps a policy per round; everything a step knows is in the policy's row
(``state``), the registry and the jobs table, so a policy goes on where it stood after any API
or worker restart. A policy's cycle (``state["phase"]``):

* ``idle``: a trigger (an alert rule fired since last seen, the schedule, N new fed-back rows;
  never within ``cooldown_seconds`` of the last retrain) queues a ``retrain`` job of the
  production alias's version → ``retraining``.
* ``retraining``: the job succeeded → the new version gets the challenger alias and a shadow
  of it starts (``shadowing``); it failed → ``idle`` with its error.
* ``shadowing``: the challenger's record (``app.loop.judge``: its canary arm's rows where
  ``judge.canary_percent`` gave it a canary in production, else its shadow's; realised and
  estimated accuracy, cost under production's decision rule, agreement); once
  ``judge.min_rows`` of them have feedback it wins when its realised accuracy beats
  production's by ``judge.margin``, its cost is not higher and its hold-out accuracy is within
  ``judge.holdout_tolerance`` of production's. ``promote``: a win moves the production alias
  to it (ending the canary; ``previous_alias`` to the version it replaced, which then shadows
  it) → ``probation``; a loss → ``idle``, the version rejected, its canary ended.
  ``register``: the verdict is recorded, nothing moves → ``idle``.
* ``probation``: the replaced version beating the promoted one by ``rollback.margin`` on
  ``rollback.min_rows`` fed-back rows rolls production back (the registry's rollback: it
  undoes the promotion) → ``idle``; the probation's end keeps it → ``idle``.

Every move is made by ``registry.service`` with actor ``policy``, its reason and its evidence
in the alias history; any of them is undone by hand like any move (POST …/rollback). Policy
times (cool-down, schedule, probation) follow the round's clock (``run_once(now)``, a test's
own); the live rows' times are the database's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.alerts import evaluator as alerts
from app.alerts.orm import AlertRule
from app.core.jsonable import jsonable
from app.core.orm import utcnow
from app.core.problems import Problem
from app.core.runtime import Runtime
from app.jobs import service as jobs
from app.loop import judge, service
from app.loop.orm import RetrainPolicy
from app.loop.schemas import PolicyConfig, RetrainRequest
from app.monitoring import inputs, shadow_service
from app.registry import service as registry
from app.registry.orm import RegisteredModel

log = logging.getLogger("app.loop")

ACTOR = "policy"


@dataclass
class Step:
    """One policy's step: its session, runtime, registered model, config, state (edited) and
    the round's time (epoch seconds)."""

    session: Session
    runtime: Runtime
    registered: RegisteredModel
    config: PolicyConfig
    state: dict[str, Any]
    now: float

    @property
    def name(self) -> str:
        return self.registered.name

    def decided(self, verdict: str, evidence: dict[str, Any] | None = None, **more: Any) -> None:
        self.state["last_decision"] = {"verdict": verdict, "at": self.now,
                                       "evidence": evidence, **more}
        self.state["phase"] = "idle"


def run_once(runtime: Runtime, now: float) -> int:
    """Step every enabled policy whose round at ``now`` this process claims; steps made."""
    seconds = float(runtime.settings.alert_interval_seconds)
    tick = datetime.fromtimestamp(math.floor(now / seconds) * seconds, UTC)
    with runtime.sessions() as session:
        ids = list(session.scalars(select(RetrainPolicy.registered_model_id)
                                   .where(RetrainPolicy.enabled.is_(True))))
        session.commit()
    stepped = 0
    for registered_id in ids:
        if _claim(runtime, registered_id, tick):
            try:
                _step(runtime, registered_id, now)
                stepped += 1
            except Exception:
                log.exception("retraining policy of registered model %s: step failed",
                              registered_id)
    return stepped


def _claim(runtime: Runtime, registered_id: int, tick: datetime) -> bool:
    with runtime.sessions() as session:
        won = session.execute(update(RetrainPolicy).where(
            RetrainPolicy.registered_model_id == registered_id,
            or_(RetrainPolicy.evaluated_until.is_(None), RetrainPolicy.evaluated_until < tick),
        ).values(evaluated_until=tick)).rowcount == 1
        session.commit()
    return won


def _step(runtime: Runtime, registered_id: int, now: float) -> None:
    with runtime.sessions() as session:
        policy = session.get(RetrainPolicy, registered_id)
        registered = session.get(RegisteredModel, registered_id)
        if policy is None or registered is None:
            return
        step = Step(session, runtime, registered, PolicyConfig.model_validate(policy.config),
                    dict(policy.state), now)
        session.commit()
        before = jsonable(step.state)
        PHASES[step.state.get("phase", "idle")](step)
        after = jsonable(step.state)
        if after != before:
            session.execute(update(RetrainPolicy).where(
                RetrainPolicy.registered_model_id == registered_id).values(
                state=after, updated_at=utcnow()))
            session.commit()


# --- idle: the triggers -------------------------------------------------------------------------


def trigger(step: Step) -> str | None:
    """Why to retrain now (None: not now)."""
    config, state = step.config.trigger, step.state
    last = state.get("last_retrain_epoch")
    if last is not None and step.now - last < config.cooldown_seconds:
        return None
    seen = state.setdefault("alerts_seen", {})
    for rule_id in config.alert_rule_ids:
        rule = step.session.get(AlertRule, rule_id)
        fired = rule.last_fired_at if rule is not None else None
        if fired is not None and (seen.get(str(rule_id)) or "") < fired.isoformat():
            seen[str(rule_id)] = fired.isoformat()
            return f"alert rule {rule_id} ({rule.name or rule.metric}) fired at {fired.isoformat()}"
    if config.schedule_seconds and (last is None or step.now - last >= config.schedule_seconds):
        return f"the schedule (every {config.schedule_seconds} s)"
    if config.min_new_labels:
        since = state.get("labels_since")
        count = inputs.labelled_count(step.session, step.name,
                                      datetime.fromisoformat(since) if since else None)
        if count >= config.min_new_labels:
            return f"{count} new fed-back rows (at least {config.min_new_labels})"
    return None


def idle(step: Step) -> None:
    reason = trigger(step)
    if reason is None:
        return
    production = step.config.judge.production_alias
    alias = production if production in registry.aliases_of(step.session, step.registered) \
        else None
    request = RetrainRequest.model_validate({**step.config.retrain.model_dump(), "alias": alias})
    try:
        job = service.submit_retrain(step.session, step.name, request, reason=f"policy: {reason}")
        step.session.commit()
    except Problem as problem:
        step.session.rollback()
        step.decided("retrain refused", trigger=reason, error=problem.detail)
        return
    step.state.update(phase="retraining", job_id=job.id, trigger=reason,
                      last_retrain_epoch=step.now, labels_since=utcnow().isoformat())
    log.info("retraining policy of %s: retrain job %s (%s)", step.name, job.id, reason)


# --- retraining: the job ------------------------------------------------------------------------


def retraining(step: Step) -> None:
    try:
        job = jobs.get_or_raise(step.session, step.state["job_id"])
    except Problem:
        step.decided("retrain job gone", job_id=step.state.get("job_id"))
        return
    if job.status in ("failed", "cancelled"):
        step.decided(f"retrain job {job.status}", job_id=job.id, error=job.error)
        return
    if job.status != "succeeded":
        return
    result = job.result or {}
    version = int(result["registered_as"]["version"])
    alias = step.config.judge.challenger_alias
    lineage = result.get("lineage") or {}
    registry.set_alias(step.session, step.name, alias, version, ACTOR, why=(
        f"retrained by the policy ({step.state.get('trigger')}): the challenger", {
            "job_id": job.id, "parent_version": lineage.get("parent_version"),
            "feedback_rows": lineage.get("feedback_rows"),
            "warm_start": lineage.get("warm_start")}))
    production = step.config.judge.production_alias
    registry.copy_alias_rule(step.session, step.name, production, alias, ACTOR)
    try:
        shadow_service.start(step.session, step.runtime, step.name, alias)
    except Problem as problem:
        step.session.rollback()
        step.decided("shadow refused", version=version, error=problem.detail)
        return
    step.state.update(phase="shadowing", challenger_version=version,
                      challenger_model_id=int(result["model_id"]),
                      shadow_since=utcnow().isoformat())
    _start_canary(step, version)


def _start_canary(step: Step, version: int) -> None:
    """The challenger answers ``judge.canary_percent`` of the production alias's requests."""
    config = step.config.judge
    percent = config.canary_percent
    if percent is None or config.production_alias not in registry.aliases_of(
            step.session, step.registered):
        return
    try:
        registry.set_canary(step.session, step.name, config.production_alias,
                            (version, float(percent)), ACTOR, why=(
                                f"the challenger (version {version}) answers {percent:g} % of "
                                f"{config.production_alias!r}'s requests while it is judged",
                                {"challenger_version": version, "percent": percent}))
    except Problem as problem:
        step.session.rollback()
        log.warning("policy of %s: no canary (%s)", step.name, problem.detail)


def _end_canary(step: Step, version: int, why: str) -> None:
    """The production alias's canary of ``version`` ends (no move when it has none)."""
    alias = step.config.judge.production_alias
    if (registry.canaries_of(step.session, step.registered).get(alias) or (None,))[0] != version:
        return
    registry.set_canary(step.session, step.name, alias, None, ACTOR,
                        why=(why, {"version": version}))


# --- shadowing: the judge -----------------------------------------------------------------------


def _pair(step: Step, challenger: int, served: int, since: str) -> judge.Pair | None:
    return judge.pair_of(step.session, step.registered, step.config.judge.production_alias,
                         challenger, served, datetime.fromisoformat(since))


def shadowing(step: Step) -> None:
    config, state = step.config.judge, step.state
    production = registry.aliases_of(step.session, step.registered).get(config.production_alias)
    pair = None if production is None else _pair(step, state["challenger_version"], production,
                                                 state["shadow_since"])
    if pair is None:
        return  # nothing to judge against until production names a version
    rec = judge.record(step.session, step.runtime, pair)
    state["record"] = rec
    wins, evidence = judge.verdict(rec, config)
    if wins is None:
        return
    evidence.update(production_version=production,
                    challenger_version=state["challenger_version"])
    version = state["challenger_version"]
    if step.config.action == "register" or not wins:
        _stop_shadow(step)
        if not wins:
            state.setdefault("rejected_versions", []).append(version)
            _end_canary(step, version, f"the challenger (version {version}) was rejected: "
                        f"{_why_not(evidence)}")
        step.decided("wins" if wins else "rejected", evidence, version=version)
        return
    promote(step, production, evidence)


def _why_not(evidence: dict[str, Any]) -> str:
    if not evidence.get("holdout_ok", True):
        return "its hold-out accuracy is too far below production's"
    if not evidence.get("cost_ok", True):
        return (f"its cost under the alias's rule is higher by "
                f"{evidence['cost_change']:.4f}")
    return (f"it gained {evidence['gain']:.4f} (needs {evidence['margin']}) on "
            f"{evidence['labelled']} fed-back rows ({evidence['source']})")


def promote(step: Step, production: int, evidence: dict[str, Any]) -> None:
    config, back, state = step.config.judge, step.config.rollback, step.state
    version = state["challenger_version"]
    rows = "its canary arm's" if evidence["source"] == "canary" else "its shadow's"
    reason = (f"promoted by the policy: version {version} beat version {production} by "
              f"{evidence['gain']:.4f} (at least {config.margin}) on {evidence['labelled']} "
              f"fed-back rows ({rows})")
    registry.set_alias(step.session, step.name, config.production_alias, version, ACTOR,
                       why=(reason, evidence))  # (ends its canary: PUT replaces the alias)
    registry.set_alias(step.session, step.name, back.previous_alias, production, ACTOR, why=(
        f"the version that version {version} replaced, shadowing it during its probation", None))
    try:
        shadow_service.start(step.session, step.runtime, step.name, back.previous_alias)
    except Problem as problem:
        step.session.rollback()
        log.warning("policy of %s: no probation shadow (%s)", step.name, problem.detail)
    step.state.update(phase="probation", promoted_version=version, previous_version=production,
                      probation_until=step.now + back.probation_seconds,
                      probation_since=utcnow().isoformat(), last_decision={
                          "verdict": "promoted", "at": step.now, "evidence": evidence})


def _stop_shadow(step: Step) -> None:
    try:
        shadow_service.stop(step.session, step.runtime, step.name)
    except Problem:
        step.session.rollback()


# --- probation: the rollback --------------------------------------------------------------------


def probation(step: Step) -> None:
    config, back, state = step.config.judge, step.config.rollback, step.state
    promoted, previous = state["promoted_version"], state["previous_version"]
    if registry.aliases_of(step.session, step.registered).get(config.production_alias) != promoted:
        _stop_shadow(step)
        step.decided("probation ended: production was moved by hand", version=promoted)
        return
    pair = _pair(step, previous, promoted, state["probation_since"])
    if pair is None:
        step.decided("probation ended: a version was deleted", version=promoted)
        return
    rec = judge.record(step.session, step.runtime, pair)
    state["record"] = rec
    ours, theirs = rec["challenger_accuracy"], rec["served_accuracy"]
    loss = None if ours is None or theirs is None else ours - theirs
    if rec["labelled"] >= back.min_rows and loss is not None and loss >= back.margin:
        roll_back(step, rec, loss)
    elif step.now >= state["probation_until"]:
        _stop_shadow(step)
        step.decided("kept: the probation ended", rec, version=promoted)


def roll_back(step: Step, rec: dict[str, Any], loss: float) -> None:
    """The production alias back to the version the promoted one replaced (the registry's
    rollback: it undoes the promotion, so it restores the canary the alias had then, which
    then ends: the rolled-back version answers nothing)."""
    config, back, state = step.config.judge, step.config.rollback, step.state
    promoted, previous = state["promoted_version"], state["previous_version"]
    evidence = {**rec, "loss": loss, "margin": back.margin, "min_rows": back.min_rows,
                "promoted_version": promoted, "previous_version": previous}
    reason = (f"rolled back by the policy: version {promoted} lost to version {previous} "
              f"by {loss:.4f} (at least {back.margin}) on {rec['labelled']} fed-back rows "
              "within its probation")
    registry.rollback_alias(step.session, step.name, config.production_alias, ACTOR,
                            why=(reason, evidence))
    _end_canary(step, promoted, f"version {promoted} was rolled back: it canaries no more")
    _stop_shadow(step)
    state.setdefault("rejected_versions", []).append(promoted)
    step.decided("rolled back", evidence, version=promoted)


PHASES: dict[str, Callable[[Step], None]] = {
    "idle": idle, "retraining": retraining, "shadowing": shadowing, "probation": probation,
}


def register(runtime: Runtime) -> None:
    """The policies' step in every round of this API process's alert evaluator."""
    alerts.add_step(runtime, run_once)
