"""Retraining data functions: which version a retrain starts from, which rows it adds, and the
``retrain`` job it queues (the worker runs ``app.loop.runner``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.core.problems import invalid
from app.datasets import service as datasets
from app.jobs import service as jobs
from app.jobs.orm import Job
from app.loop.schemas import RetrainJob, RetrainOptions, RetrainRequest
from app.models import service as models
from app.registry import service as registry
from app.registry.orm import ModelVersion, RegisteredModel
from app.registry.references import SERVING_ALIAS
from app.training import service as training


def parent_version(session: Session, registered: RegisteredModel, alias: str | None,
                   version: int | None) -> ModelVersion:
    """The version a retrain starts from: ``version``, the one ``alias`` names, else the
    served one (``production``, else the newest); 422/404 naming the field."""
    if alias is not None and version is not None:
        raise invalid(["body", "alias"], "give alias or version, not both")
    aliases = registry.aliases_of(session, registered)
    if alias is not None:
        if alias not in aliases:
            raise invalid(["body", "alias"],
                          f"registered model {registered.name!r} has no alias {alias!r}")
        version = aliases[alias]
    elif version is None:
        version = aliases.get(SERVING_ALIAS)
        if version is None:
            newest = registry.versions_of(session, registered)
            if not newest:
                raise invalid(["path", "name"],
                              f"registered model {registered.name!r} has no version")
            version = newest[0]["version"]
    found = session.get(ModelVersion, (registered.id, version))
    if found is None:
        raise invalid(["body", "version"],
                      f"registered model {registered.name!r} has no version {version}")
    return found


def window_since(session: Session, parent: ModelVersion, window_seconds: int | None,
                 now: datetime) -> datetime:
    """Where a retrain's feedback rows start: a retrained parent's own start (its rows are
    kept), else the parent's registration; a window starts no earlier than ``now`` minus it."""
    since = parent.created_at
    window = (registry.lineage_of(session, parent) or {}).get("window") or {}
    if window.get("since"):
        since = min(since, datetime.fromisoformat(window["since"]))
    if window_seconds is not None:
        since = max(since, now - timedelta(seconds=window_seconds))
    return since


def submit_retrain(session: Session, name: str, request: RetrainRequest,
                   reason: str = "by hand", now: datetime | None = None) -> Job:
    """Queue a ``retrain`` job of registered model ``name`` (flushed, not committed): the
    parent, its dataset (locked until the commit, as /train locks one) and the fit's params
    are fixed now; the feedback rows are read by the job, up to ``now``."""
    now = now or datetime.now(UTC)
    registered = registry.get_or_raise(session, name)
    parent = parent_version(session, registered, request.alias, request.version)
    model = models.get_or_raise(session, parent.model_id)
    if (model.params or {}).get("weight_column"):
        raise invalid(["path", "name"], f"version {parent.version} was fitted with the rows' "
                      "weights of a column; fed-back rows have none, so it cannot be retrained")
    if model.dataset_id is None or datasets.get(session, model.dataset_id) is None:
        raise invalid(["body", "include_dataset"], f"version {parent.version}'s training "
                      "dataset no longer exists; a retrain needs it (its rows and encoding)")
    (dataset,) = datasets.lock_or_raise(session, [model.dataset_id], [["path", "name"]])
    since = window_since(session, parent, request.window_seconds, now)
    params = job_params(registered.name, parent, model, dataset, request, reason, (since, now))
    return jobs.enqueue(session, kind="retrain", params=params, dataset_id=dataset.id)


def job_params(name: str, parent: ModelVersion, model: Any, dataset: Any,
               options: RetrainOptions, reason: str,
               window: tuple[datetime, datetime]) -> dict[str, Any]:
    train = training.refit_params(dataset, model.algorithm, dict(model.params or {}),
                                  model.scaling, options.search)
    job = RetrainJob(
        name=name, parent_version=parent.version, parent_model_id=model.id,
        since=window[0], until=window[1],
        include_dataset=options.include_dataset,
        warm_start=options.warm_start and options.search is None,
        compare_cold=options.compare_cold, split=options.split, train=train, reason=reason)
    return job.model_dump(mode="json")
