"""The webhook dispatcher: a daemon thread per API process that sends the due deliveries with
httpx (never on the event loop) and schedules the retries.

A delivery is claimed before it is sent by a conditional UPDATE (``pending`` and due, or a
``sending`` claim whose lease ran out: its process died) so that no two processes send the same
attempt. A 2xx answer ends it (``delivered``); another answer or no answer is an attempt kept in
its ``history`` and the next is due after ``retry_base · 2^(attempts − 1)`` seconds (capped at
``MAX_BACKOFF_SECONDS``), until ``webhook_max_attempts`` (then ``failed``). The retries are
scheduled in the database, not slept in a loop (a retry library such as tenacity sleeps in the
calling thread and forgets its schedule with the process): a retry outlives a restart, any
process may make it, and one slow receiver holds no thread while it waits."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from app.core.orm import utcnow
from app.core.runtime import Part, Runtime
from app.webhooks import signing
from app.webhooks.orm import Webhook, WebhookDelivery

log = logging.getLogger("app.webhooks")

CLAIM_SECONDS = 60.0  # a claim's lease: past it another process may send the attempt
MAX_BACKOFF_SECONDS = 3600.0
BATCH = 20  # deliveries claimed per round


class Failing:
    """A background round that may fail while the database is away: the first failure of a
    run of them is logged (a database error in one line, anything else with its traceback),
    the next ones not, and the recovery once."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing = False

    def run(self, step: Callable[[], object]) -> None:
        try:
            step()
        except SQLAlchemyError as exc:
            if not self.failing:
                log.warning("%s failed, retried each round: %s", self.what, type(exc).__name__)
            self.failing = True
            return
        except Exception:  # the thread must go on
            if not self.failing:
                log.exception("%s failed, retried each round", self.what)
            self.failing = True
            return
        if self.failing:
            log.info("%s works again", self.what)
        self.failing = False


def backoff(attempts: int, base: float) -> float:
    """Seconds before attempt ``attempts + 1`` after ``attempts`` failed ones."""
    return min(MAX_BACKOFF_SECONDS, base * 2.0 ** max(0, attempts - 1))


class Dispatcher:
    """See the module's docstring: ``run_once`` is one round (the thread's, or a test's)."""

    label = "webhook dispatcher"

    def __init__(self, runtime: Runtime) -> None:
        s = runtime.settings
        self.sessions = runtime.sessions
        self.interval = float(s.alert_interval_seconds)
        self.retry_base = float(s.webhook_retry_base_seconds)
        self.max_attempts = int(s.webhook_max_attempts)
        self.client = httpx.Client(timeout=float(s.webhook_timeout_seconds),
                                   follow_redirects=False)
        self._stop = threading.Event()
        self.wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="msvmav-webhook-dispatcher",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failing = Failing("webhook dispatch")
        while not self._stop.is_set():
            failing.run(self.run_once)
            self.wake.wait(self.interval)
            self.wake.clear()

    def close(self) -> None:
        self._stop.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30.0)
        self.client.close()

    def run_once(self) -> int:
        """Claim and send the due deliveries; how many were sent."""
        sent = 0
        for delivery_id in self._due():
            if self._stop.is_set():
                break
            claimed = self._claim(delivery_id)
            if claimed is not None:
                self._finish(delivery_id, self._send(*claimed))
                sent += 1
        return sent

    def _due(self) -> list[int]:
        now = utcnow()
        d = WebhookDelivery
        with self.sessions() as session:
            return list(session.scalars(select(d.id).where(or_(
                (d.status == "pending") & (d.next_attempt_at <= now),
                (d.status == "sending") & (d.claimed_until < now),
            )).order_by(d.next_attempt_at).limit(BATCH)))

    def _claim(self, delivery_id: int) -> tuple[str, str, str, str, int] | None:
        """(url, secret, body, event, id) of the delivery once this process holds it."""
        now = utcnow()
        d = WebhookDelivery
        with self.sessions() as session:
            won = session.execute(update(d).where(d.id == delivery_id, or_(
                (d.status == "pending") & (d.next_attempt_at <= now),
                (d.status == "sending") & (d.claimed_until < now),
            )).values(status="sending", claimed_until=now + timedelta(seconds=CLAIM_SECONDS)))
            if won.rowcount != 1:
                session.rollback()
                return None
            row = session.execute(select(Webhook.url, Webhook.secret, d.body, d.event).join(
                Webhook, Webhook.id == d.webhook_id).where(d.id == delivery_id)).first()
            session.commit()
        return None if row is None else (*row, delivery_id)

    def _send(self, url: str, secret: str, body: str, event: str,
              delivery_id: int) -> dict[str, Any]:
        """One attempt: the POST's status code (or the error), signed now."""
        raw = body.encode()
        headers = {"Content-Type": "application/json", "Msvmav-Event": event,
                   "Msvmav-Delivery": str(delivery_id),
                   signing.HEADER: signing.sign(secret, raw, int(time.time()))}
        attempt: dict[str, Any] = {"at": utcnow().isoformat(), "status_code": None,
                                   "error": None}
        try:
            attempt["status_code"] = self.client.post(url, content=raw,
                                                      headers=headers).status_code
        except Exception as exc:  # no answer (refused, timed out, a URL httpx cannot send to)
            attempt["error"] = f"{type(exc).__name__}: {exc}"[:500]
        return attempt

    def _finish(self, delivery_id: int, attempt: dict[str, Any]) -> None:
        """Record the attempt: delivered, failed, or pending again after the backoff."""
        with self.sessions() as session:
            row = session.get(WebhookDelivery, delivery_id)
            if row is None:  # its hook was deleted meanwhile
                return
            code = attempt["status_code"]
            row.attempts += 1
            row.history = [*(row.history or []), attempt]
            row.response_code = code
            row.claimed_until = None
            now = utcnow()
            if code is not None and 200 <= code < 300:
                row.status, row.delivered_at = "delivered", now
            elif row.attempts >= self.max_attempts:
                row.status = "failed"
            else:
                row.status = "pending"
                row.next_attempt_at = now + timedelta(
                    seconds=backoff(row.attempts, self.retry_base))
            session.commit()


def _make(runtime: Runtime) -> Dispatcher:
    return Dispatcher(runtime)


DISPATCHER: Part[Dispatcher] = Part("webhook dispatcher", _make, Dispatcher.close)
