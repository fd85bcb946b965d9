"""The suite's only ways of letting time pass (tests/test_structure.py refuses a bare
``time.sleep`` / ``asyncio.sleep`` anywhere else in tests/).

- ``wait_until``: waiting for something to happen (a row, a log line, a process's readiness, a
  scheduler's queue emptying) is waiting on that condition, with a deadline. This is the one
  polling loop; a test with a threading.Event, a distributed.Event or the recheck clock
  (tests/app/recheck_clock.py) to wait on uses that instead.
- ``simulate_slow_peer``, ``hold_outage``, ``let_run``: sleeps that ARE the behaviour under test
  (a client trickling its headers, a database down for a given time, load or a worker's loop
  going on for a given time), named for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.02,
    message: str = "timed out",
) -> T:
    """``condition()``'s first true value, polled every ``interval`` s; AssertionError
    (``message``) once ``timeout`` s have passed without one. The condition is asked once more
    at the deadline, so a slow last poll is not lost."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"{message} (within {timeout} s)")
        time.sleep(interval)


def simulate_slow_peer(seconds: float) -> None:
    """A peer that is slow on purpose (a client trickling its request past a server deadline):
    the delay is what the test is about."""
    time.sleep(seconds)


def hold_outage(seconds: float) -> None:
    """Keep a stopped server down this long: the outage's length (longer than a lease, say) is
    what the test is about."""
    time.sleep(seconds)


def let_run(seconds: float) -> None:
    """Let what runs in the background (load threads, a worker's loop) go on this long: a
    span the test is about (what must not happen in it, or the traffic it carries), not a wait
    for something to happen."""
    time.sleep(seconds)
