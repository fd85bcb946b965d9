"""Service settings, read from the environment (prefix ``MSVMAV_``) or a ``.env`` file."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the service; the README's configuration table mirrors this class."""

    model_config = SettingsConfigDict(env_prefix="MSVMAV_", env_file=".env", extra="ignore")

    database_url: str = Field(
        "sqlite:///./msvmav.db",
        description="SQLAlchemy URL: sqlite:///path.db or postgresql+psycopg://user:pw@host/db",
    )
    max_upload_bytes: int = Field(
        200 * 1024 * 1024, gt=0, description="Largest accepted upload (dataset or predict file)"
    )
    max_rows: int = Field(2_000_000, gt=0, description="Largest accepted dataset, in rows")
    max_features: int = Field(200_000, gt=0, description="Largest accepted dataset, in features")
    max_predict_instances: int = Field(
        100_000, gt=0, description="Most rows in one /predict or /predict/file request"
    )
    worker_poll_interval: float = Field(
        1.0, gt=0, description="Seconds an idle worker waits before looking for queued jobs again"
    )
    heartbeat_interval: float = Field(
        5.0, gt=0, description="Seconds between heartbeats of a worker running a job"
    )
    stale_job_after: float = Field(
        60.0,
        gt=0,
        description="A running job whose heartbeat is older than this many seconds is failed",
    )
    cancel_check_interval: float = Field(
        0.2, ge=0, description="Least seconds between two progress/cancel-flag checks of a fit"
    )
    search_jobs: int = Field(
        1,
        ge=1,
        le=256,
        description="Processes one worker uses for a cross-validated search or an experiment "
        "(1: in the worker process; several workers usually share the machine)",
    )
    dask_scheduler: str | None = Field(
        None,
        description="Dask scheduler address (tcp://host:8786): searches and experiments run "
        "their cells on that cluster (pip install 'msvmav[dask]'); unset: on this machine, in "
        "search_jobs processes. An unreachable scheduler fails the job",
    )
    log_level: str = Field("INFO", description="Python logging level")


@lru_cache
def get_settings() -> Settings:
    return Settings()
