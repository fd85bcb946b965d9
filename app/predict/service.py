"""Encode raw rows with the model's stored dataset encoding, scale, predict."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from app.core.config import Settings
from app.core.logs import request_id_var
from app.core.orm import Model
from app.core.problems import ingest_problem, invalid, too_large
from app.datasets.service import check_has_rows, check_not_blank, check_upload_size
from app.ingest import (
    Encoder,
    IngestError,
    Limits,
    parse_feature_file,
    parse_feature_file_skipping,
)
from app.models import service as models
from app.monitoring import log as prediction_log
from app.monitoring import shadow
from app.predict.fastjson import gc_paused
from app.predict.numeric_rows import NumericRows
from app.predict.schemas import IDS_ADAPTER
from app.predict.target import Target, reference_fields, resolve_target
from app.registry.references import Stamp
from solver.jsonable import jsonable

#: Skipped rows /predict/file lists with ``on_error="skip"`` (it counts them all).
SKIPPED_SHOWN = 100


def _check_count(n: int, settings: Settings, loc: list[str | int]) -> None:
    if n > settings.max_predict_instances:
        raise too_large(
            f"{n} rows; at most {settings.max_predict_instances} per request "
            "(MSVMAV_MAX_PREDICT_INSTANCES)",
            field=loc[-1],
        )


def _check_matrix(X: Any, model: Model | models.LoadedModel, loc: list[str | int]) -> None:
    if X.ndim != 2 or X.shape[1] != model.n_features:
        raise invalid(
            loc,
            f"rows encode to {X.shape[-1]} features; model {model.id} expects {model.n_features}",
        )
    values = X.data if sp.issparse(X) else np.asarray(X)
    bad = ~np.isfinite(values)
    if bad.any():
        if sp.issparse(X):
            row = int(np.searchsorted(X.indptr, np.flatnonzero(bad)[0], side="right") - 1)
        else:
            row = int(np.argwhere(bad)[0][0])
        raise invalid([*loc, row], f"row {row} has a missing, NaN or infinite value", row=row)


def _loaded(
    session: Session, model_id: int, loc: list[str | int] | None, stamp: Stamp | None = None
) -> models.LoadedModel:
    """The model ready to predict (cached after its first use), read in read-only
    transactions that end here, before the caller computes."""
    loaded = models.load_cached(session, model_id, loc, stamp)
    if session.in_transaction():  # a cache miss read the model
        session.commit()
    return loaded


def _target_loaded(
    session: Session, target: Target, loc: list[str | int]
) -> tuple[models.LoadedModel, Target]:
    """The target's model, resolving a reference first (one read, which also checks the
    stored model); ``loc`` names the request's ``model_id``/``model`` field."""
    bind = session.get_bind()
    target = resolve_target(getattr(bind, "engine", bind), target, [*loc[:-1], "model"])
    assert target.model_id is not None
    return _loaded(session, target.model_id, loc, target.stamp), target


def _rows_model(
    sessions: sessionmaker[Session], target: Target, loc: list[str | int]
) -> tuple[models.LoadedModel, Target]:
    """``_target_loaded`` without an ORM session while the cache holds the current model (the
    stamp read on a pooled connection, as ``models.load_cached`` does): opening and closing
    a session cost a one-row /predict about 5% of its time. A miss reads it in a session."""
    engine = sessions.kw["bind"]
    target = resolve_target(engine, target, [*loc[:-1], "model"])
    assert target.model_id is not None
    stamp = target.stamp
    if stamp is None:
        stamp = models.model_stamp(engine, target.model_id)
    hit = models.engine_cache(engine).get(target.model_id) if stamp is not None else None
    if hit is not None and hit.stamp == stamp:
        return hit, target
    with sessions() as session:
        return _loaded(session, target.model_id, loc, stamp), target


def _row_encoder(loaded: models.LoadedModel) -> Encoder:
    encoder = loaded.extras.get("row_encoder")
    if encoder is None:
        encoder = loaded.extras["row_encoder"] = Encoder.from_dict(loaded.encoding)
    return encoder


def _decision_function(est: Any, X: Any) -> np.ndarray:
    """``est.decision_function(X)`` for X that ``_check_matrix`` passed (2-D float64, finite, the
    model's width) and the model's own scaling produced: without scikit-learn's input
    validation again, which for one row cost more than the prediction itself."""
    return np.asarray(est.decision_values(X), dtype=np.float64)


def _scale(loaded: models.LoadedModel, X: Any) -> tuple[Any, np.ndarray]:
    """X (the request's own rows) scaled like the training data, and per row whether any
    feature fell outside [0, 1] before the scaling's clip (outside the training range)."""
    scaling = loaded.scaling
    if scaling is None:
        return X, np.zeros(X.shape[0], dtype=bool)
    Xs = scaling.transform(X, clip=False, copy=False)
    if sp.issparse(Xs):
        data = Xs.data
        outside = (data < 0.0) | (data > 1.0)
        rows = np.repeat(np.arange(Xs.shape[0]), np.diff(Xs.indptr))
        clipped = np.bincount(rows[outside], minlength=Xs.shape[0]) > 0
        np.clip(data, 0.0, 1.0, out=data)
        Xs.eliminate_zeros()
        return Xs, clipped
    clipped = (Xs.min(axis=1) < 0.0) | (Xs.max(axis=1) > 1.0)
    return np.clip(Xs, 0.0, 1.0, out=Xs), clipped


def row_ids(ids: list[Any] | None, n: int, loc: list[str | int]) -> list[Any]:
    """The client's ids (one per row, 422 naming ``loc`` otherwise), or
    ``"{request_id}:{row}"``."""
    if ids is not None:
        if len(ids) != n:
            raise invalid(loc, f"{len(ids)} ids for {n} rows; give one per row")
        return ids
    prefix = f"{request_id_var.get() or uuid.uuid4().hex}:"
    return [prefix + str(i) for i in range(n)]


LogSink = Callable[[list[Any], np.ndarray, np.ndarray, np.ndarray, Any], Any]


def _log_sink(engine: Any, settings: Settings, target: Target) -> LogSink | None:
    """Where this request's scored rows go: the prediction log's queue (one tuple appended;
    app.monitoring.log), or None when the log is off."""
    writer = prediction_log.writer(getattr(engine, "engine", engine), settings)
    if writer is None:
        return None
    resolved = target.resolved
    assert target.model_id is not None
    head = (
        target.model_id,
        resolved.name if resolved else None,
        resolved.version if resolved else None,
        resolved.alias if resolved else None,
    )
    return lambda ids, scores, idx, clipped, features: writer.record(
        (*head, datetime.now(UTC), ids, scores, idx, clipped, features)
    )


def _shadow_sink(engine: Any, target: Target) -> shadow.Sink | None:
    """A running shadow's queue when the request named its registered model by the default or
    ``production`` reference (a cached look-up, no I/O); else None."""
    resolved = target.resolved
    if resolved is None:
        return None
    return shadow.sink(engine, target.model_id, resolved.name, target.reference)


def form_ids(text: str | None) -> list[Any] | None:
    """The ``ids`` form field of /predict/file (a JSON array), validated like PredictRequest's."""
    if text is None or not text.strip():
        return None
    try:
        return IDS_ADAPTER.validate_json(text)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = [str(p) for p in error["loc"]]
        at = f" (item {where[0]})" if where else ""
        raise invalid(["body", "ids"], f"ids must be a JSON array{at}: {error['msg']}") from None


def _predictions(
    class_values: list[Any], idx: np.ndarray, scores: np.ndarray, ids: list[Any], clipped: Any
) -> list[dict[str, Any]]:
    label_of = [class_values[i] for i in idx.tolist()]
    clip_of = clipped.tolist()
    if scores.ndim == 1:
        return [
            {"id": i, "clipped": c, "label": p, "decision_value": s, "decision_values": None}
            for i, c, p, s in zip(ids, clip_of, label_of, scores.tolist(), strict=True)
        ]
    own = scores[np.arange(len(idx)), idx].tolist()
    return [
        {"id": i, "clipped": c, "label": p, "decision_value": s, "decision_values": row}
        for i, c, p, s, row in zip(ids, clip_of, label_of, own, scores.tolist(), strict=True)
    ]


def _respond(
    loaded: models.LoadedModel,
    X: Any,
    labels: list[Any] | None,
    labels_loc: list[str | int],
    ids: list[Any] | None = None,
    sink: LogSink | None = None,
    shadow_sink: shadow.Sink | None = None,
) -> dict[str, Any]:
    """The PredictResponse body as plain JSON values, built column-wise; X (the request's
    own rows) is scaled in place. ``ids`` are the client's (checked here: one per row); the
    scored rows go to ``sink`` (the prediction log) and, with their encoded rows, to
    ``shadow_sink`` (a running shadow's challenger: app.monitoring.shadow), if any."""
    est = loaded.estimator
    ids = row_ids(ids, X.shape[0], [*labels_loc[:-1], "ids"])
    raw = X.copy() if shadow_sink is not None else None
    Xs, clipped = _scale(loaded, X)
    scores = _decision_function(est, Xs)
    classes = est.classes_
    class_values = loaded.extras.get("class_values")
    if class_values is None:
        class_values = loaded.extras["class_values"] = jsonable(classes.tolist())
    # Labels from these scores: est.predict(Xs) would compute the decision function (for
    # kernel models, the costly part) a second time.
    idx = est.predicted_index(scores)
    with gc_paused():
        predictions = _predictions(class_values, idx, scores, ids, clipped)
    response: dict[str, Any] = {
        "model_id": loaded.id,
        "classes": list(class_values),
        "n": len(predictions),
        "predictions": predictions,
        "accuracy": None,
        "margins": None,
    }
    if labels is not None:
        if len(labels) != len(predictions):
            raise invalid(
                labels_loc, f"{len(labels)} labels for {len(predictions)} rows; give one per row"
            )
        predicted = classes[idx]
        y_true = classes[models.match_labels(classes, labels, labels_loc)]
        response["accuracy"] = float(np.mean(predicted == y_true))
        response["margins"] = jsonable(est.margins(Xs, y_true, decision=scores))
    if sink is not None:  # (a valid request only; the scaled rows by reference, for
        # app.monitoring.feature_drift, when the model has min-max scaling)
        sink(ids, scores, idx, clipped, Xs if loaded.scaling is not None else None)
    if shadow_sink is not None:
        shadow_sink(raw, ids, scores, idx, clipped)
    return response


def predict_rows(
    sessions: sessionmaker[Session],
    *,
    target: Target,
    instances: list[Any],
    labels: list[Any] | None,
    settings: Settings,
    ids: list[Any] | None = None,
) -> dict[str, Any]:
    """The PredictResponse body for raw rows or records (see ``_respond``); ``instances`` may
    be a large body's rows still as bytes (``[NumericRows]``, see app.predict.numeric_rows)."""
    block = instances[0] if len(instances) == 1 else None
    if not isinstance(block, NumericRows):
        block = None
    elif block.n_rows > settings.max_predict_instances:  # (an upper bound: count them exactly)
        instances, block = block.rows_list(), None
    _check_count(block.n_rows if block else len(instances), settings, ["body", "instances"])
    loaded, target = _rows_model(sessions, target, ["body", "model_id"])
    sink = _log_sink(sessions.kw["bind"], settings, target)
    shadow_sink = _shadow_sink(sessions.kw["bind"], target)
    encoder = _row_encoder(loaded)
    X = encoder.transform_matrix(block.matrix()) if block and encoder.plain_numeric else None
    if X is not None:  # finite, of the model's width: nothing left to check
        answer = _respond(loaded, X, labels, ["body", "labels"], ids, sink, shadow_sink)
        return answer | reference_fields(target)
    if block is not None:  # not a rectangle of numbers this model takes: the usual path
        instances = block.rows_list()
    try:
        X = encoder.transform_rows(instances)
    except IngestError as exc:
        loc: list[str | int] = ["body", "instances"]
        if exc.row is not None:
            loc.append(exc.row)
        raise ingest_problem(exc, loc) from exc
    _check_matrix(X, loaded, ["body", "instances"])
    answer = _respond(loaded, X, labels, ["body", "labels"], ids, sink, shadow_sink)
    return answer | reference_fields(target)


def predict_file(
    session: Session,
    *,
    target: Target,
    content: bytes,
    filename: str,
    label: str | int | None,
    settings: Settings,
    ids: list[Any] | None = None,
    on_error: str = "fail",
) -> dict[str, Any]:
    """The PredictResponse body for an uploaded file (see ``_respond``); ``on_error="skip"``
    leaves out the rows that cannot be encoded and lists the first ``SKIPPED_SHOWN`` of them
    (``skipped``), their ``ids`` with them."""
    check_upload_size(len(content), settings)
    loaded, target = _target_loaded(session, target, ["body", "model_id"])
    check_not_blank(not content or content.isspace())  # (not strip(): no copy of the upload)
    limits = Limits(max_encoded_bytes=settings.max_encoded_bytes)
    skipped = None
    try:
        if on_error == "skip":
            X, y, kept, errors = parse_feature_file_skipping(
                loaded.encoding, content, filename, label=label, limits=limits)
            skipped = {"n": len(errors), "errors": errors[:SKIPPED_SHOWN]}
            if ids is not None:
                ids = [ids[i] for i in kept] if len(ids) == len(kept) + len(errors) else ids
        else:
            X, y = parse_feature_file(loaded.encoding, content, filename, label=label,
                                      limits=limits)
    except IngestError as exc:
        field = "label" if exc.field == "label" else "file"
        raise ingest_problem(exc, ["body", field]) from exc
    _check_count(X.shape[0], settings, ["body", "file"])
    check_has_rows(X.shape[0])
    _check_matrix(X, loaded, ["body", "file"])
    labels = None if y is None else list(np.asarray(y).tolist())
    sink = _log_sink(session.get_bind(), settings, target)
    shadow_sink = _shadow_sink(session.get_bind(), target)
    answer = _respond(loaded, X, labels, ["body", "label"], ids, sink, shadow_sink)
    if skipped is not None:
        answer["skipped"] = skipped
    return answer | reference_fields(target)
