"""Bodies of /ui-api."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SessionOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"auth_required": True, "name": "dashboard", "scope": "read"}]
        }
    )

    auth_required: bool = Field(description="False: the service is open (no keys configured)")
    name: str | None = Field(description="The key's name (null on an open service)")
    scope: str = Field(description="read, write or admin (an open service: admin)")


class JobCounts(BaseModel):
    queued: int
    running: int
    succeeded: int
    failed: int
    cancelled: int


class OverviewOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "datasets": 4,
                    "models": 12,
                    "registered_models": 2,
                    "experiments": 1,
                    "jobs": {"queued": 1, "running": 1, "succeeded": 12, "failed": 1,
                             "cancelled": 0},
                    "queue_length": 1,
                    "workers_alive": 1,
                }
            ]
        }
    )

    datasets: int
    models: int
    registered_models: int
    experiments: int
    jobs: JobCounts
    queue_length: int = Field(description="Jobs queued")
    workers_alive: int = Field(
        description="Workers holding a running job whose heartbeat is within its lease"
    )


class ModelVersionRef(BaseModel):
    name: str = Field(description="The registered model")
    version: int


class ModelVersions(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"versions": [{"name": "wdbc", "version": 2}]}]}
    )

    versions: list[ModelVersionRef] = Field(description="By name, then version")


class ShadowOrNone(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"shadow": None}]})

    shadow: dict[str, Any] | None = Field(
        description="GET /registered-models/{name}/shadow's report; null: no shadow"
    )


class PolicyOrNone(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"policy": None}]})

    policy: dict[str, Any] | None = Field(
        description="GET /registered-models/{name}/policy's answer; null: no retraining policy"
    )
