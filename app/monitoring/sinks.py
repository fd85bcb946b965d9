"""Monitoring's score sinks, registered on a runtime at the app's start-up (``register``): every
scored request's rows go to the prediction log (app.monitoring.log) and, when it named a
registered model with a running shadow by its default or ``production`` reference, to the
shadow's queue (app.monitoring.shadow); a request through a registered model also keeps its
encoded rows (app.monitoring.inputs: the retraining jobs' feedback rows). The serving room
calls them (app.serving.sinks); it imports nothing of monitoring."""

from __future__ import annotations

from datetime import UTC, datetime

from app.core.runtime import Runtime
from app.monitoring import inputs, shadow
from app.monitoring import log as prediction_log
from app.serving import sinks
from app.serving.sinks import Recorder, Scored
from app.serving.target import Target


class LogSink:
    """The prediction log's queue: one tuple appended per request (None when the log is off)."""

    raw = False

    def open(self, runtime: Runtime, target: Target) -> Recorder | None:
        writer = prediction_log.writer(runtime)
        if writer is None:
            return None
        resolved = target.resolved
        head = (
            target.model_id,
            resolved.name if resolved else None,
            resolved.version if resolved else None,
            resolved.alias if resolved else None,
        )

        def record(scored: Scored) -> None:
            s = scored.scores  # (the scaled rows by reference, for feature drift, when the
            # model has min-max scaling)
            scaled = s.scaled if scored.model.scaling is not None else None
            writer.record(
                (*head, datetime.now(UTC), scored.ids, s.decision, s.index, s.clipped, scaled)
            )

        return record


class ShadowSink:
    """A running shadow's queue, with the encoded rows before scaling (a cached look-up of
    the running shadows, no I/O)."""

    raw = True

    def open(self, runtime: Runtime, target: Target) -> Recorder | None:
        resolved = target.resolved
        if resolved is None:
            return None
        queue = shadow.sink(runtime, target.model_id, resolved.name, target.reference)
        if queue is None:
            return None
        return lambda scored: queue(
            scored.raw, scored.ids, scored.scores.decision, scored.scores.index,
            scored.scores.clipped,
        )


class InputSink:
    """The logged inputs' queue (app.monitoring.inputs): the encoded rows of a request made
    through a registered model, for the retraining jobs (None when inputs are not kept)."""

    raw = True

    def open(self, runtime: Runtime, target: Target) -> Recorder | None:
        resolved = target.resolved
        # a request naming a stored model's id (model_id, or model "3") has no registered
        # model: nothing to retrain from its inputs
        if resolved is None or resolved.name is None or target.model_id is None:
            return None
        writer = inputs.writer(runtime)
        if writer is None:
            return None
        model_id, name = target.model_id, resolved.name
        return lambda scored: writer.record(model_id, name, scored.ids, scored.raw)


LOG = LogSink()
SHADOW = ShadowSink()
INPUTS = InputSink()


def register(runtime: Runtime) -> None:
    """Monitoring's sinks on ``runtime`` (the app's start-up): the log first, then a shadow."""
    sinks.register(runtime, LOG)
    sinks.register(runtime, SHADOW)
    sinks.register(runtime, INPUTS)
