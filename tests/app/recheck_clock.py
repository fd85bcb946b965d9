"""The recheck window's clock for tests: ``app.core.recheck.now`` replaced by a clock that
moves only when the test moves it (``clock.t += seconds``), so a test steps across the window
without sleeping. The same clock holds the wall time the keys' expiries are compared with
(``app.auth.service.utcnow``, read by the service and the gate): ``clock.ahead += seconds``
moves it past an ``expires_at`` without waiting for it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from app.auth import service as keys_service
from app.core import recheck
from app.core.orm import utcnow


class Clock:
    """recheck.now() for the test: moves only when the test moves it."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.ahead = 0.0  # seconds the keys' wall clock runs ahead of the real one

    def __call__(self) -> float:
        return self.t

    def utcnow(self) -> datetime:
        return utcnow() + timedelta(seconds=self.ahead)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(recheck, "now", c)
    monkeypatch.setattr(keys_service, "utcnow", c.utcnow)
    return c
