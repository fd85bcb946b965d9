"""The alert evaluator's clock for tests: ``app.alerts.evaluator.clock`` and ``pause`` replaced
by a clock that moves only when the test moves it (``alert_clock.advance(seconds)``), so a test
steps a rule's windows past without waiting for them to end.

Every evaluator thread of the process pauses on this clock between its rounds (registered with
the time it wakes at). ``advance`` wakes those whose time came; ``settle`` waits until each has
run its round and paused again (past the clock's time), or ended: after it, every evaluator the
process runs has looked at the windows ended by then. A process with no evaluator settles at
once, so an absence test asserts on the rounds that any evaluator would have made."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from app.alerts import evaluator

POLL = 0.05  # how often a paused round looks at its stop event (set by Evaluator.close)


class AlertClock:
    """evaluator.clock() and evaluator.pause() for the test (see the module's docstring)."""

    def __init__(self, start: float) -> None:
        self.t = start
        self._changed = threading.Condition()
        self._waking: dict[int, float] = {}  # paused or running thread -> the time it wakes at

    def __call__(self) -> float:
        with self._changed:
            return self.t

    def pause(self, stop: threading.Event, seconds: float) -> bool:
        me = threading.get_ident()
        with self._changed:
            self._waking[me] = wake = self.t + seconds
            self._changed.notify_all()
            while self.t < wake and not stop.is_set():
                self._changed.wait(POLL)
            if stop.is_set():
                del self._waking[me]
                self._changed.notify_all()
                return True
            return False  # its entry stays (its wake time past) until it pauses again

    def advance(self, seconds: float) -> None:
        with self._changed:
            self.t += seconds
            self._changed.notify_all()

    def paused(self) -> int:
        """How many evaluator threads pause on this clock."""
        with self._changed:
            return len(self._waking)

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until every evaluator thread ran its due round and paused again (or ended)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while any(wake <= self.t for wake in self._waking.values()):
                left = deadline - time.monotonic()
                assert left > 0, f"the evaluators' rounds did not end within {timeout} s"
                self._changed.wait(left)


@pytest.fixture
def alert_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[AlertClock]:
    c = AlertClock(time.time())
    monkeypatch.setattr(evaluator, "clock", c)
    monkeypatch.setattr(evaluator, "pause", c.pause)
    yield c
