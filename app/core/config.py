"""Service settings, read from the environment (prefix ``MSVMAV_``) or a ``.env`` file."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


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
    max_json_bytes: int = Field(
        32 * 1024 * 1024,
        gt=0,
        description="Largest accepted JSON request body (e.g. /predict rows); checked on the "
        "byte stream before parsing",
    )
    max_rows: int = Field(2_000_000, gt=0, description="Largest accepted dataset, in rows")
    max_features: int = Field(200_000, gt=0, description="Largest accepted dataset, in features")
    max_encoded_bytes: int = Field(
        1024 * 1024 * 1024,
        gt=0,
        description="Largest encoded feature matrix of an upload, in bytes (rows x features x 8 "
        "dense, about 12 per non-zero when one-hot makes it sparse); checked before encoding",
    )
    max_fit_bytes: int = Field(
        default_factory=lambda: half_of_physical_memory(),
        gt=0,
        description="Largest predicted peak memory of one training fit (solver.memory's "
        "estimate for the largest configuration of a search), checked when /train is "
        "submitted -> 422; default half the machine's physical memory",
    )
    max_fit_seconds: float | None = Field(
        None,
        gt=0,
        description="Largest predicted duration of one training job in seconds "
        "(solver.fit_time's estimate: a search counts every cross-validation fit), checked "
        "when /train is submitted -> 422; unset: no limit",
    )
    array_chunk_bytes: int = Field(
        64 * 1024 * 1024,
        gt=0,
        le=64 * 1024 * 1024,
        description="Stored arrays are cut into database rows of at most this many bytes",
    )
    max_predict_instances: int = Field(
        100_000, gt=0, description="Most rows in one /predict or /predict/file request"
    )
    max_explain_work: int = Field(
        2_000_000_000,
        gt=0,
        description="Most work (multiply-adds, solver.explain.explain_work: rows x the "
        "method's cost per row) one request may ask to explain; checked before starting",
    )
    batch_max_upload_bytes: int = Field(
        10 * 1024 * 1024 * 1024,
        gt=0,
        description="Largest file a batch scoring job (POST /batch-predictions) accepts; it is "
        "stored in the database in pieces and read back in chunks by the worker",
    )
    batch_chunk_rows: int = Field(
        100_000,
        gt=0,
        le=1_000_000,
        description="Rows a batch scoring job reads, scores and writes at a time (a request "
        "may choose its own `chunk_rows`); the worker's memory follows it, not the file",
    )
    batch_result_hours: float = Field(
        168.0,
        gt=0,
        description="A batch scoring job's result and errors files are kept this many hours "
        "after the job ends; then GET .../result answers 410 and they are deleted",
    )
    prediction_log: bool = Field(
        True,
        description="Record every row /predict (and /predict/file, V2 infer, invocations) "
        "scores in the prediction log (written off the request path in batches; "
        "docs/monitoring.md); false turns it off",
    )
    log_inputs: bool = Field(
        True,
        description="Also keep the encoded input row of each logged prediction made through a "
        "registered model (at most 1,000 rows a request; table prediction_inputs, kept as long "
        "as the log's rows), so that POST /registered-models/{name}/retrain can train on the "
        "fed-back rows; false: not kept (a retrain then adds no feedback rows)",
    )
    alerts: bool = Field(
        True,
        description="Evaluate the alert rules on their windows and send the webhooks' "
        "deliveries from this API process (docs/monitoring.md); false: neither",
    )
    alert_interval_seconds: float = Field(
        1.0, gt=0, le=3600,
        description="How often the alert evaluator looks for ended windows and the webhook "
        "dispatcher for due deliveries (seconds)",
    )
    webhook_retry_base_seconds: float = Field(
        1.0, gt=0, le=3600,
        description="A failed webhook delivery is tried again after this many seconds, "
        "doubling with each failed attempt (at most an hour)",
    )
    webhook_max_attempts: int = Field(
        8, ge=1, le=100, description="Attempts of a webhook delivery before it is failed"
    )
    webhook_timeout_seconds: float = Field(
        5.0, gt=0, le=60, description="Seconds a webhook receiver has to answer an attempt"
    )
    prediction_log_days: float = Field(
        30.0, gt=0, description="Prediction log rows older than this many days are deleted"
    )
    prediction_log_max_rows: int = Field(
        10_000_000, gt=0, description="The prediction log keeps at most this many newest rows"
    )
    prediction_log_spool_dir: str | None = Field(
        None,
        description="Where the prediction log keeps the rows the database has not taken yet "
        "beyond its memory share (an outage, a writer behind the traffic); default: a folder "
        "per database under the system's temporary directory (docs/monitoring.md)",
    )
    prediction_log_spool_mb: int = Field(
        1024, ge=0, description="Most megabytes of rows held in the prediction log's spool file"
    )
    header_timeout: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="msvmav serve: seconds a client has to send a request's line and headers "
        "(counted from the connection or the previous response); then 408 and the connection "
        "is closed",
    )
    worker_poll_interval: float = Field(
        1.0,
        gt=0,
        description="Seconds an idle worker waits before looking for queued jobs again (a newly "
        "queued job wakes it sooner: on PostgreSQL at once, by NOTIFY; on SQLite within 0.1 s, "
        "by a read of the queue)",
    )
    heartbeat_interval: float = Field(
        2.5, gt=0, description="Seconds between heartbeats of a worker running a job"
    )
    lease_seconds: float = Field(
        10.0,
        gt=0,
        description="A running job whose heartbeat is older than this many seconds has lost its "
        "worker (killed or frozen): it is re-queued, or failed after max_attempts such losses",
    )
    max_attempts: int = Field(
        3,
        ge=1,
        le=100,
        description="How many times a job may lose its worker (lease expired) before it is "
        "failed instead of re-queued",
    )
    worker_alive_file: str = Field(
        "/tmp/msvmav-worker-alive",
        description="File a worker touches from its main loop (and its fit callbacks); "
        "`msvmav worker --check` reads its age",
    )
    worker_alive_max_age: float = Field(
        120.0,
        gt=0,
        description="`msvmav worker --check` fails when the worker's alive file is older than "
        "this many seconds (its loop stopped)",
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
    data_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Where datasets by reference may be read from: comma-separated absolute "
        "local directories and/or URL prefixes (s3://bucket/prefix); unset: registering a "
        "dataset by reference is refused (403)",
    )
    output_root: str | None = Field(
        None,
        description="Where batch jobs over a dataset by reference write their Parquet output "
        "(a local directory or URL prefix, under the same rules); unset: beside the dataset, "
        "in a directory `<dataset dir>/scores-<job id>`",
    )
    dask_fit_min_bytes: int | None = Field(
        None,
        gt=0,
        description="With MSVMAV_DASK_SCHEDULER set, uploaded datasets whose feature matrix "
        "is larger than this are fitted on the cluster too (datasets by reference always "
        "are); unset: only datasets by reference",
    )
    log_level: str = Field("INFO", description="Python logging level")
    auth: Literal["auto", "on", "off"] = Field(
        "auto",
        description="API keys: `on` requires a key on every request but /livez, /readyz and the "
        "docs; `off` never; `auto` requires one once any key exists (even revoked) or "
        "MSVMAV_ADMIN_KEY is set, and always when `msvmav serve` listens beyond loopback",
    )
    admin_key: SecretStr | None = Field(
        None,
        min_length=24,
        description="An admin API key given by the environment (bootstrap; at least 24 "
        "characters, e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(32))'`); "
        "only its hash is kept in memory for the comparison, never stored",
    )

    db_lock_timeout: float = Field(
        1.0,
        gt=0,
        description="PostgreSQL: longest wait of an API transaction for a row lock (a frozen "
        "worker's, say); beyond it the request answers 503 with Retry-After",
    )
    db_statement_timeout: float = Field(
        60.0,
        gt=0,
        description="PostgreSQL: longest statement, and longest idle open transaction, of the "
        "API; beyond it the request answers 503",
    )
    serve_recheck_seconds: float = Field(
        1.0,
        ge=0,
        le=60,
        description="Seconds a serving request's checks (its model still exists, its registry "
        "reference still points there, its API key is not revoked) are trusted before the "
        "database is asked again; a model deleted, an alias moved or a key revoked by another "
        "process stops serving within that time (at once in the process that made the change), "
        "on either database; 0: every request asks (app.core.recheck)",
    )
    retry_after_seconds: int = Field(
        2,
        ge=1,
        description="Retry-After of a 503 answered because the database is away, busy or "
        "locked",
    )

    @field_validator("data_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _lease_outlasts_heartbeats(self) -> Settings:
        if self.lease_seconds < 2 * self.heartbeat_interval:
            raise ValueError(
                f"lease_seconds ({self.lease_seconds:g}) must be at least twice "
                f"heartbeat_interval ({self.heartbeat_interval:g}): one late heartbeat must not "
                "take a running job from its worker"
            )
        return self


def half_of_physical_memory() -> int:
    """Half the machine's physical memory in bytes (4 GiB where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES")) // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 4 * 2**30


@lru_cache
def get_settings() -> Settings:
    return Settings()
