"""POST /feedback: true labels joined to logged predictions by their ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.problems import invalid, too_large
from app.core.runtime import Runtime, runtime_of
from app.models import service as models
from app.models.orm import Model
from app.monitoring import inputs
from app.monitoring import log as prediction_log
from app.monitoring.orm import PredictionLog
from app.monitoring.schemas import LABELS_PER_ID, FeedbackRequest
from app.registry.references import resolve_request

# Ids per SELECT ... IN (...) and per UPDATE (well under SQLite's 32,766 parameters).
CHUNK = 500
UNKNOWN_SHOWN = 10


def model_of(session: Session, model_id: int | None, reference: str | None) -> Model:
    """The stored model a request names by ``model_id`` or by registry ``model`` reference
    (as every door resolves it: app.registry.references); 422/404 naming the field otherwise."""
    if (model_id is None) == (reference is None):
        raise invalid(["body", "model"], "give exactly one of model (a reference) and model_id")
    if reference is not None:
        model_id = resolve_reference(session, reference, ["body", "model"])
    return models.get_or_raise(session, model_id, ["body", "model_id"])


def resolve_reference(session: Session, reference: str, loc: list[str | int]) -> int:
    """The stored model id a registry reference names now; 422 naming ``loc`` when malformed,
    404 saying what is missing."""
    return resolve_request(runtime_of(session), reference, loc)[0].model_id


def arm_model(session: Session, name: str, alias: str, arm: str, loc: list[str | int]) -> int:
    """The stored model of ``arm`` ("primary" or "canary") of ``name@alias`` now; 422 naming
    ``loc`` when the alias has no canary, 404 when it does not exist."""
    resolved = resolve_request(runtime_of(session), f"{name}@{alias}", ["path", "name"])[0]
    if arm == "primary":
        return resolved.model_id
    if resolved.canary is None:
        raise invalid(loc, f"alias {alias!r} of registered model {name!r} has no canary")
    return resolved.canary.model_id


def record_feedback(
    session: Session, runtime: Runtime, request: FeedbackRequest, settings: Settings
) -> dict[str, Any]:
    """Set the true class of the logged rows of the request's ids (all rows of an id the log
    holds twice); ``{"matched", "unknown_ids", "log"}`` (the log's state the ids were matched
    against: ``PredictionLogWriter.state``)."""
    n = len(request.ids)
    if n > settings.max_predict_instances:
        raise too_large(
            f"{n} ids; at most {settings.max_predict_instances} per request "
            "(MSVMAV_MAX_PREDICT_INSTANCES)",
            field="ids",
        )
    if len(request.labels) != n:
        raise invalid(["body", "labels"],
                      f"{LABELS_PER_ID}: {len(request.labels)} labels for {n} ids")
    # This process's rows queued before now: waited for a bounded time, never for the writer
    # (others' are written within their flush interval); the answer says how many still wait.
    writer = prediction_log.writer(runtime)
    state = writer.state() if writer is not None else None
    kept = inputs.writer(runtime)  # and their inputs (a retrain reads both): bounded alike
    if kept is not None:
        kept.catch_up(prediction_log.READ_WAIT_SECONDS)
    model = model_of(session, request.model_id, request.model)
    true = models.match_labels(np.asarray(model.classes), request.labels, ["body", "labels"])
    found: set[str] = set()
    now = datetime.now(UTC)
    for answered in [model, *_canary_models(session, request.model, model)]:
        if answered is not model:  # the canary's own class indices
            true = models.match_labels(np.asarray(answered.classes), request.labels,
                                       ["body", "labels"])
        found |= _label_rows(session, answered.id, request.ids, true, now)
    session.commit()
    unknown = [i for i in dict.fromkeys(request.ids) if str(i) not in found][:UNKNOWN_SHOWN]
    return {"matched": len(found), "unknown_ids": unknown, "log": state}


def _canary_models(session: Session, reference: str | None, primary: Model) -> list[Model]:
    """The canary's stored model when ``reference`` names an alias with a canary (a bare name:
    its production alias) whose classes are the primary's: a row its canary arm answered is
    the alias's row too, so its feedback labels it."""
    if reference is None:
        return []
    resolved = resolve_request(runtime_of(session), reference, ["body", "model"])[0]
    if resolved.canary is None or resolved.canary.model_id == primary.id:
        return []
    canary = models.get(session, resolved.canary.model_id)
    if canary is None or [str(c) for c in canary.classes] != [str(c) for c in primary.classes]:
        return []
    return [canary]


def _label_rows(session: Session, model_id: int, ids: list[Any], true: np.ndarray,
                now: datetime) -> set[str]:
    """Set the true class of model ``model_id``'s logged rows of ``ids``; the ids found."""
    # One label per id (the last given); ids compared as the log stores them, as text.
    wanted = {str(i): int(c) for i, c in zip(ids, true.tolist(), strict=True)}
    keys = list(wanted)
    found: set[str] = set()
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        hits = set(
            session.scalars(
                select(PredictionLog.prediction_id)
                .where(PredictionLog.model_id == model_id, PredictionLog.prediction_id.in_(chunk))
                .distinct()
            )
        )
        found |= hits
        by_class: dict[int, list[str]] = {}
        for key in hits:
            by_class.setdefault(wanted[key], []).append(key)
        for true_class, same in by_class.items():  # one UPDATE per class and chunk
            session.execute(
                update(PredictionLog)
                .where(PredictionLog.model_id == model_id, PredictionLog.prediction_id.in_(same))
                .values(true_class=true_class, feedback_at=now)
            )
    return found
