"""Job kinds → their runners. Each runner lives with its domain and is imported only when a
worker first runs a job of that kind, so the worker imports no domain module at import time
(and no domain module imports the worker)."""

from __future__ import annotations

import importlib

from app.jobs.runtime import Runner

# kind -> "module:function"; a new kind registers here and nowhere else.
RUNNERS: dict[str, str] = {
    "train": "app.training.runner:run_train_job",
    "experiment": "app.experiments.runner:run_experiment_job",
}


def get_runner(kind: str) -> Runner:
    """The runner of ``kind``; ValueError (the job's error) for an unknown kind."""
    target = RUNNERS.get(kind)
    if target is None:
        raise ValueError(f"no runner for job kind {kind!r}; known kinds: {sorted(RUNNERS)}")
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
