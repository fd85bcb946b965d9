"""The recheck window's clock for tests: ``app.core.recheck.now`` replaced by a clock that
moves only when the test moves it (``clock.t += seconds``), so a test steps across the window
without sleeping."""

from __future__ import annotations

import pytest

from app.core import recheck


class Clock:
    """recheck.now() for the test: moves only when the test moves it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(recheck, "now", c)
    return c
