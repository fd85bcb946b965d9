"""The alert evaluator: a daemon thread per API process that evaluates every enabled rule on
each of its windows as the window ends, and enqueues a webhook delivery when it crosses.

A rule's windows are [k·w, (k+1)·w) in UTC seconds since the epoch (w its ``window_seconds``);
the newest window that ended ``GRACE_SECONDS`` ago (the log's writers write their rows within
0.1 s) is evaluated once, by whichever process claims it first: a conditional UPDATE of the
rule's ``evaluated_until`` (only from an earlier end to this one), so that across API processes
each window is evaluated once. A window missed while no process ran is not evaluated later.
The window's values are kept in ``last_window`` (the gauges on /metrics read them). A crossing
fires only through a second conditional UPDATE, of ``last_fired_at`` from before the cool-down
to now, in the transaction that enqueues the deliveries: never twice inside a cool-down,
whichever processes evaluate.

The rules a process claims in one round share their reports: one monitoring report (the domain
classifier included, 0.1–0.5 s) per model and window, whatever the number of rules on it.
Only API processes evaluate (``app.main``'s lifespan starts this thread; ``msvmav worker``
processes never do): each runs one evaluator unless ``MSVMAV_ALERTS=false``. Other domains add
a step to its rounds (``add_step``: app.loop's retraining policies), given the round's time.

The rounds' clock is ``clock`` and the pause between them ``pause``, both read at each call (as
app.core.recheck's ``now``): a test replaces them (tests/app/alert_clock.py) and steps windows
past without waiting for them to end."""

from __future__ import annotations

import logging
import math
import operator
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.alerts.orm import AlertRule
from app.core.jsonable import jsonable
from app.core.problems import Problem
from app.core.runtime import Part, Runtime
from app.monitoring import feedback, report
from app.webhooks import dispatcher
from app.webhooks import service as webhooks

log = logging.getLogger("app.alerts")

GRACE_SECONDS = 1.0
#: One round's monitoring reports by (model id, window start, window end).
Reports = dict[tuple[int, datetime, datetime], dict[str, Any]]
COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def clock() -> float:
    """The rounds' clock: epoch seconds (the time the windows are ended by)."""
    return time.time()


def pause(stop: threading.Event, seconds: float) -> bool:
    """Wait ``seconds`` between two rounds, or until ``stop`` is set; whether it was set."""
    return stop.wait(seconds)


def window_end(now: float, seconds: int) -> datetime:
    """The end of the newest window of length ``seconds`` that ended ``GRACE_SECONDS``
    before ``now`` (epoch seconds)."""
    end = math.floor((now - GRACE_SECONDS) / seconds) * seconds
    return datetime.fromtimestamp(end, UTC)


def values_of(rep: dict[str, Any]) -> dict[str, float | None]:
    """Every metric a rule may watch, from one monitoring report."""
    est = rep.get("performance_estimate") or {}
    atc = est.get("atc") or {}
    drift = rep.get("drift") or {}
    density = rep.get("margin_density") or {}
    verdict = (est.get("reliability") or {}).get("verdict")
    return {
        "estimated_accuracy": est.get("estimate"),
        "atc_accuracy": atc.get("estimate"),
        "realised_accuracy": est.get("realised_accuracy"),
        "accuracy_gap": est.get("gap"),
        "drift_statistic": drift.get("statistic"),
        "drift_p_value": drift.get("p_value"),
        "clipped_share": (rep.get("live") or {}).get("clipped_fraction"),
        "margin_density": density.get("live"),
        "margin_density_change": density.get("change"),
        "unreliable": None if verdict in (None, "none") else float(verdict == "unreliable"),
        "rows": float((rep.get("live") or {}).get("n") or 0),
    }


def crossed(rule: AlertRule, values: dict[str, float | None]) -> bool:
    value = values.get(rule.metric)
    if value is None or (values["rows"] or 0) < rule.min_rows:
        return False
    return bool(COMPARE[rule.comparison](value, rule.level))


class Evaluator:
    """See the module's docstring: ``run_once`` is one round (the thread's, or a test's)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.interval = float(runtime.settings.alert_interval_seconds)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="msvmav-alert-evaluator",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failing = dispatcher.Failing("alert evaluation")
        while not pause(self._stop, self.interval):
            failing.run(self.run_once)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30.0)

    def run_once(self, now: float | None = None) -> int:
        """Evaluate each enabled rule's newest ended window not yet claimed at ``now`` (epoch
        seconds; ``clock()`` by default); fires made."""
        now = clock() if now is None else now
        with self.runtime.sessions() as session:
            rules = list(session.scalars(select(AlertRule).where(AlertRule.enabled.is_(True))))
            session.commit()
        fired = 0
        reports: Reports = {}  # this round's, shared by the rules on one model and window
        for rule in rules:
            end = window_end(now, rule.window_seconds)
            if rule.evaluated_until is not None and rule.evaluated_until >= end:
                continue
            if self._claim(rule, end):
                fired += self._evaluate_or_log(rule, end, reports)
        if fired:
            waiting = self.runtime.peek(dispatcher.DISPATCHER)
            if waiting is not None:
                waiting.wake.set()
        for step in self.runtime.peek(STEPS) or ():
            try:
                step(self.runtime, now)
            except SQLAlchemyError:
                raise
            except Exception:
                log.exception("a step of the alert evaluator's round failed")
        return fired

    def _claim(self, rule: AlertRule, end: datetime) -> bool:
        with self.runtime.sessions() as session:
            won = session.execute(update(AlertRule).where(
                AlertRule.id == rule.id,
                or_(AlertRule.evaluated_until.is_(None), AlertRule.evaluated_until < end),
            ).values(evaluated_until=end)).rowcount == 1
            session.commit()
        return won

    def _evaluate_or_log(self, rule: AlertRule, end: datetime, reports: Reports) -> int:
        """``_evaluate``; a failure that is not the database's is logged and the window
        passed over, so that one broken rule leaves the others' windows evaluated."""
        try:
            return self._evaluate(rule, end, reports)
        except SQLAlchemyError:
            raise
        except Exception:
            log.exception("alert rule %s: the window ending %s was not evaluated", rule.id,
                          end.isoformat())
            return 0

    def _evaluate(self, rule: AlertRule, end: datetime, reports: Reports) -> int:
        """The rule's window ending at ``end``: its values kept, a fire when it crosses; the
        window's report taken from ``reports`` when another rule of this round computed it."""
        since = end - timedelta(seconds=rule.window_seconds)
        with self.runtime.sessions() as session:
            try:
                model_id = rule.model_id or feedback.resolve_reference(
                    session, rule.model or "", ["model"])
                rep = reports.get((model_id, since, end))
                if rep is None:
                    rep = reports[(model_id, since, end)] = report.model_report(
                        session, model_id, since, end)
            except Problem as exc:  # the model or reference names nothing now
                _keep(session, rule, {"since": since.isoformat(), "until": end.isoformat(),
                                     "error": exc.detail})
                return 0
            values = values_of(rep)
            window = {"since": since.isoformat(), "until": end.isoformat(), "model_id": model_id,
                      "values": values}
            _keep(session, rule, window)
            if not crossed(rule, values):
                return 0
            return _fire(session, rule, end, window, rep)


def _keep(session: Session, rule: AlertRule, window: dict[str, Any]) -> None:
    session.execute(update(AlertRule).where(AlertRule.id == rule.id).values(
        last_window=jsonable(window)))
    session.commit()


def _fire(session: Session, rule: AlertRule, end: datetime, window: dict[str, Any],
          rep: dict[str, Any]) -> int:
    """1 when this process fired (outside the cool-down), with the deliveries enqueued in the
    same transaction; else 0."""
    now = datetime.now(UTC)
    cutoff = now - timedelta(seconds=rule.cooldown_seconds)
    won = session.execute(update(AlertRule).where(
        AlertRule.id == rule.id,
        or_(AlertRule.last_fired_at.is_(None), AlertRule.last_fired_at <= cutoff),
    ).values(last_fired_at=now)).rowcount == 1
    if not won:
        session.rollback()
        return 0
    rule_part = {k: getattr(rule, k) for k in ("id", "name", "model_id", "model", "metric",
                                                "comparison", "level", "window_seconds",
                                                "cooldown_seconds", "min_rows")}
    data = {"rule": rule_part, "value": window["values"][rule.metric], "window": window,
            "fired_at": now.isoformat(), "warnings": rep.get("warnings", []),
            "reliability": (rep.get("performance_estimate") or {}).get("reliability")}
    webhooks.enqueue(session, "alert", jsonable(data), rule_id=rule.id)
    session.commit()
    log.info("alert rule %s fired (%s %s %s)", rule.id, rule.metric, rule.comparison,
             rule.level)
    return 1


#: What else each round runs, given the runtime and the round's time (``add_step``).
STEPS: Part[list[Callable[[Runtime, float], Any]]] = Part("alert round steps", lambda _r: [])


def add_step(runtime: Runtime, step: Callable[[Runtime, float], Any]) -> None:
    """Run ``step(runtime, now)`` in every round of ``runtime``'s evaluator (once)."""
    steps = runtime.get(STEPS)
    if step not in steps:
        steps.append(step)


def _make(runtime: Runtime) -> Evaluator:
    return Evaluator(runtime)


EVALUATOR: Part[Evaluator] = Part("alert evaluator", _make, Evaluator.close)


def start(runtime: Runtime) -> None:
    """The app's start: the evaluator's and the dispatcher's threads (``MSVMAV_ALERTS``)."""
    if not runtime.settings.alerts:
        return
    runtime.get(dispatcher.DISPATCHER).start()
    runtime.get(EVALUATOR).start()
