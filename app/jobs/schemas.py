"""Response bodies of /jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.pagination import Page
from app.jobs.orm import JobAttemptOutcome

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]

#: a train job's params (app.training.schemas.TrainJob), also /train's example request
TRAIN_PARAMS_EXAMPLE = {
    "dataset_id": 1,
    "kernel": "linear",
    "alpha": 16.0,
    "beta": 0.25,
    "max_iter": 100,
    "scaling": "minmax",
    "test_fraction": 0.2,
    "seed": 0,
}

_JOB_EXAMPLE = {
    "id": 7,
    "kind": "train",
    "status": "running",
    "progress": 0.42,
    "message": "task 1/1, iteration 42/100: θ̂=0.8731, SV/θ̂²=0.1204",
    "params": TRAIN_PARAMS_EXAMPLE,
    "dataset_id": 1,
    "model_id": None,
    "result": None,
    "error": None,
    "cancel_requested": False,
    "attempts": 1,
    "worker_id": "host:1234:ab12",
    "created_at": "2026-01-01T12:00:00Z",
    "started_at": "2026-01-01T12:00:01Z",
    "finished_at": None,
    "heartbeat_at": "2026-01-01T12:00:03Z",
}


class JobOut(BaseModel):
    """A background job and its progress."""

    model_config = ConfigDict(
        from_attributes=True,
        protected_namespaces=(),
        json_schema_extra={"examples": [_JOB_EXAMPLE]},
    )

    id: int
    kind: str = Field(description="What the job does: `train` or `experiment`")
    status: JobStatus
    progress: float = Field(ge=0, le=1, description="Fraction done, 0–1")
    message: str = Field(
        description="Latest progress message (iteration, θ̂, SV/θ̂²; `CV cell k/n` during a "
        "search; `fit k/n` in an experiment)"
    )
    params: dict[str, Any] = Field(
        description="The job's parameters as submitted (train: without top-level defaults that "
        "do not apply to the algorithm, plus the resolved `estimator_params` and, with a "
        "search, `search.grid_values`)"
    )
    dataset_id: int | None
    model_id: int | None = Field(description="The trained model, once succeeded")
    result: dict[str, Any] | None = Field(description="Kind-specific result summary")
    error: str | None = Field(description="Why it failed")
    cancel_requested: bool
    attempts: int = Field(
        description="How many times a worker claimed it (a job whose worker was lost is "
        "re-queued and claimed again, up to MSVMAV_MAX_ATTEMPTS lost workers)"
    )
    worker_id: str | None = Field(description="Worker that ran (or runs) it")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None


class JobAttemptOut(BaseModel):
    """One claim of the job by a worker."""

    model_config = ConfigDict(from_attributes=True)

    number: int = Field(description="1 for the first claim, 2 for the next, …")
    worker_id: str = Field(description="The worker (host:pid:random)")
    started_at: datetime
    finished_at: datetime | None = Field(description="null while it runs")
    outcome: JobAttemptOutcome = Field(
        description="running; succeeded/failed/cancelled; requeued (its worker shut down and "
        "put the job back); lost (its worker stopped heartbeating for MSVMAV_LEASE_SECONDS: "
        "killed or frozen; or msvmav serve saw its embedded worker die)"
    )


_ATTEMPTS_EXAMPLE = [
    {
        "number": 1,
        "worker_id": "host:1187:9f03aa",
        "started_at": "2026-01-01T11:59:40Z",
        "finished_at": "2026-01-01T11:59:58Z",
        "outcome": "lost",
    },
    {
        "number": 2,
        "worker_id": "host:1234:ab12",
        "started_at": "2026-01-01T12:00:01Z",
        "finished_at": None,
        "outcome": "running",
    },
]


class JobDetail(JobOut):
    """A job with the history of its attempts."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{**_JOB_EXAMPLE, "attempts": 2, "attempt_history": _ATTEMPTS_EXAMPLE}]
        }
    )

    attempt_history: list[JobAttemptOut] = Field(description="Each claim by a worker, oldest first")


class JobPage(Page[JobOut]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_JOB_EXAMPLE], "next_cursor": None}]}
    )
