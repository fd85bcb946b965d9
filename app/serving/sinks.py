"""Where a request's scored rows go besides its answer: ``ScoreSink``s, registered per runtime at
start-up by the rooms that keep them (app.monitoring.sinks: the prediction log and a running
shadow's queue), so that the serving room imports no monitoring module.

``serve`` (app.serving.serve) opens every registered sink for a request once its model is
resolved (``open_sinks``: each says, without I/O, whether it records this request) and hands
each the ``Scored`` rows after the core scored them and before the door encodes the answer: a
request refused before it is recorded nowhere, and a scored request is recorded exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.runtime import Part, Runtime
from app.serving.model import ServedModel
from app.serving.scoring import Scores
from app.serving.target import Target


@dataclass(frozen=True)
class Scored:
    """One request's scored rows, as the sinks and the door's encoder see them."""

    model: ServedModel
    target: Target  # resolved: the model's id, and the reference that named it, if any
    ids: list[Any]  # one per row (the client's, or ``{request id}:{row}``)
    scores: Scores
    raw: Any = None  # the encoded rows before scaling, when a sink asked for them


# A request's recorder: takes its Scored rows (never blocks on I/O).
Recorder = Callable[[Scored], Any]


class ScoreSink(Protocol):
    """A place scored rows go (see the module's docstring)."""

    #: Does it need the encoded rows as they were before the core scaled them in place (a
    #: copy is taken for it)?
    raw: bool

    def open(self, runtime: Runtime, target: Target) -> Recorder | None:
        """This request's recorder, or None when it records nothing for it. No I/O."""
        ...


#: The sinks registered on a runtime (app.monitoring.sinks.register, at the app's start-up).
SINKS: Part[list[ScoreSink]] = Part("score sinks", lambda _runtime: [])


def register(runtime: Runtime, sink: ScoreSink) -> None:
    """Add ``sink`` to the runtime's sinks (once: registering it again changes nothing)."""
    sinks = runtime.get(SINKS)
    if sink not in sinks:
        sinks.append(sink)


@dataclass(frozen=True)
class Opened:
    """A request's open recorders, and whether any needs the raw rows."""

    recorders: tuple[Recorder, ...] = ()
    raw: bool = False

    def record(self, scored: Scored) -> None:
        for recorder in self.recorders:
            recorder(scored)


NONE = Opened()


def open_sinks(runtime: Runtime, target: Target) -> Opened:
    """The recorders of a request for ``target`` (resolved) on ``runtime``."""
    sinks = runtime.peek(SINKS)
    if not sinks:
        return NONE
    recorders, raw = [], False
    for sink in sinks:
        recorder = sink.open(runtime, target)
        if recorder is not None:
            recorders.append(recorder)
            raw = raw or sink.raw
    return Opened(tuple(recorders), raw) if recorders else NONE
