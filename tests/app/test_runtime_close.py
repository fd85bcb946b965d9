"""Runtime.close closes every part even when one part's close fails (a writer's last flush
refused by the database): before, the exception stopped the loop, the parts made before it
kept their threads and the pools stayed open (the suite's thread check then failed every later
test of that worker process)."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import create_engine

from app.core.runtime import Part, Runtime


def _refuse(_value: object) -> None:
    raise RuntimeError("the last flush was refused")


def test_a_failing_part_does_not_stop_the_others_closing(tmp_path: Path, caplog) -> None:
    closed: list[str] = []
    first = Part("first part", lambda runtime: "first", closed.append)
    failing = Part("failing part", lambda runtime: "failing", _refuse)
    runtime = Runtime(create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}"), None)
    assert runtime.get(first) == "first" and runtime.get(failing) == "failing"
    with caplog.at_level(logging.ERROR, logger="app.core.runtime"):
        runtime.close()  # the failing part, made last, is closed first
    assert closed == ["first"]
    assert runtime.closed
    assert "closing the runtime's failing part failed" in caplog.text
    runtime.close()  # idempotent
    assert closed == ["first"]

