"""Job kinds → their typed runners (``app.jobs.kinds.JobKind``). Each kind lives with its
domain and is imported only when a worker first runs a job of that kind, so the worker imports
no domain module at import time (and no domain module imports the worker or this registry)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.jobs.kinds import JobKind
from app.jobs.runtime import Runner


def _train() -> JobKind[Any]:
    from app.training.runner import TRAIN

    return TRAIN


def _experiment() -> JobKind[Any]:
    from app.experiments.runner import EXPERIMENT

    return EXPERIMENT


def _batch_predict() -> JobKind[Any]:
    from app.batch.runner import BATCH

    return BATCH


def _retrain() -> JobKind[Any]:
    from app.loop.runner import RETRAIN

    return RETRAIN


# kind -> its JobKind; a new kind registers here and nowhere else.
RUNNERS: dict[str, Callable[[], JobKind[Any]]] = {
    "train": _train, "experiment": _experiment, "batch_predict": _batch_predict,
    "retrain": _retrain,
}


def get_runner(kind: str) -> Runner:
    """The runner of ``kind`` (validates the job's params, then runs it); ValueError (the
    job's error) for an unknown kind."""
    load = RUNNERS.get(kind)
    if load is None:
        raise ValueError(f"no runner for job kind {kind!r}; known kinds: {sorted(RUNNERS)}")
    return load()
