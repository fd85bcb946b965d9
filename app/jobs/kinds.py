"""A job kind: the pydantic model of its params and its typed runner. Each domain declares its
kind next to its runner (``app.training.runner.TRAIN``, ``app.experiments.runner.EXPERIMENT``);
``app.jobs.registry`` maps kind names to them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from app.jobs.runtime import JobContext, JobResult

M = TypeVar("M", bound=BaseModel)
P = TypeVar("P")


class JobParamsError(ValueError):
    """A job's stored params do not match its kind's model (the job's error)."""


def read_params(model: type[M], params: dict[str, Any]) -> M:
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
    """``kind`` jobs store ``params`` (the JSON of a ``params`` model); ``run`` runs one in a
    worker, given what ``read`` makes of the stored JSON (by default the model itself; the
    ``train`` kind's is its ``FitPlan``, app.training.fit_plan)."""

    kind: str
    params: type[BaseModel]
    run: Callable[[JobContext, P], JobResult]
    read: Callable[[dict[str, Any]], P] | None = None

    def __call__(self, ctx: JobContext) -> JobResult:
        """The worker's entry point: the stored params read, then the typed runner."""
        if self.read is not None:
            return self.run(ctx, self.read(ctx.params))
        return self.run(ctx, read_params(self.params, ctx.params))  # type: ignore[arg-type]
