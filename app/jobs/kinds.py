"""A job kind: the pydantic model of its params and its typed runner. Each domain declares its
kind next to its runner (``app.training.runner.TRAIN``, ``app.experiments.runner.EXPERIMENT``);
``app.jobs.registry`` maps kind names to them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from app.jobs.runtime import JobContext, JobResult

P = TypeVar("P", bound=BaseModel)


class JobParamsError(ValueError):
    """A job's stored params do not match its kind's model (the job's error)."""


def read_params(model: type[P], params: dict[str, Any]) -> P:
    """``params`` as ``model``; JobParamsError naming the first field at fault."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        raise JobParamsError(
            f"the job's params are not a valid {model.__name__}: {where}: {first['msg']}"
        ) from None


@dataclass(frozen=True)
class JobKind(Generic[P]):
    """``kind`` jobs store ``params`` (a ``P``); ``run`` runs one in a worker."""

    kind: str
    params: type[P]
    run: Callable[[JobContext, P], JobResult]

    def __call__(self, ctx: JobContext) -> JobResult:
        """The worker's entry point: the stored params validated, then the typed runner."""
        return self.run(ctx, read_params(self.params, ctx.params))
