"""Encode raw rows with the model's stored dataset encoding, scale, predict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.core import recheck
from app.core.config import Settings
from app.core.jsonable import jsonable
from app.core.problems import ingest_problem, invalid
from app.core.runtime import Runtime, runtime_of
from app.datasets.service import check_has_rows, check_not_blank, check_upload_size
from app.ingest import (
    Encoder,
    IngestError,
    Limits,
    parse_feature_file,
    parse_feature_file_skipping,
)
from app.models import service as models
from app.models.decisions import Decision, RuleError, choose, override_rule
from app.models.explaining import check_explain_cost
from app.models.orm import Model
from app.models.scoring import Scores, check_rows, row_ids, score
from app.monitoring import log as prediction_log
from app.monitoring import shadow
from app.predict import refresh
from app.predict.fastjson import gc_paused
from app.predict.numeric_rows import NumericRows
from app.predict.schemas import IDS_ADAPTER
from app.predict.target import Target, reference_fields, resolve_target
from app.registry.references import Stamp, recalled, recalled_at

#: Skipped rows /predict/file lists with ``on_error="skip"`` (it counts them all).
SKIPPED_SHOWN = 100


def check_matrix(X: Any, model: Model | models.LoadedModel, loc: list[str | int]) -> None:
    """422 naming ``loc`` (and the row) unless X has the model's width and finite values."""
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
    session: Session,
    model_id: int,
    loc: list[str | int] | None,
    stamp: Stamp | None = None,
    checked_at: float | None = None,
) -> models.LoadedModel:
    """The model ready to predict (cached after its first use), read in read-only
    transactions that end here, before the caller computes."""
    loaded = models.load_cached(session, model_id, loc, stamp, checked_at)
    if session.in_transaction():  # a cache miss read the model
        session.commit()
    return loaded


def _target_loaded(
    session: Session, target: Target, loc: list[str | int]
) -> tuple[models.LoadedModel, Target]:
    """The target's model, resolving a reference first (one read, which also checks the
    stored model); ``loc`` names the request's ``model_id``/``model`` field."""
    target = resolve_target(runtime_of(session), target, [*loc[:-1], "model"])
    assert target.model_id is not None
    return _loaded(session, target.model_id, loc, target.stamp), target


def _rows_model(
    runtime: Runtime, target: Target, loc: list[str | int]
) -> tuple[models.LoadedModel, Target]:
    """``_target_loaded`` without an ORM session while the cache holds the current model (the
    stamp read on a pooled connection, as ``models.load_cached`` does): opening and closing
    a session cost a one-row /predict about 5% of its time. No read at all while the last one
    is younger than app.core.recheck's window. A miss reads the model in a session."""
    seconds = runtime.settings.serve_recheck_seconds
    target = resolve_target(runtime, target, [*loc[:-1], "model"], seconds)
    assert target.model_id is not None
    stamp, checked_at = target.stamp, None
    if stamp is None:
        held = models.held_fresh(runtime, target.model_id, seconds)
        if held is not None:
            return held, target
        checked_at = recheck.now()
        stamp = models.model_stamp(runtime, target.model_id)
    hit = runtime.get(models.MODEL_CACHE).current(target.model_id, stamp)
    if hit is not None:
        if checked_at is not None:
            hit.checked_at = checked_at
        return hit, target
    with runtime.sessions() as session:
        return _loaded(session, target.model_id, loc, stamp, checked_at), target


def held_target(runtime: Runtime, target: Target) -> Target | None:
    """``target`` resolved, with its model's stamp, when this process holds that model and
    every check the request needs is younger than app.core.recheck's window: its answer
    needs no read (it may be given on the event loop). None otherwise. No I/O."""
    seconds = runtime.settings.serve_recheck_seconds
    if seconds <= 0:
        return None
    if not target.pending:
        hit = models.held_fresh(runtime, target.model_id, seconds)
        if hit is None:
            return None
        if refresh.due(hit.checked_at, seconds):  # renewed off the request path
            runtime.get(refresh.REFRESHER).ahead(target)
        return replace(target, stamp=hit.stamp)
    assert target.reference is not None
    memo = recalled(runtime, target.reference, seconds)
    if memo is None:
        return None
    resolved, stamp = memo
    if runtime.get(models.MODEL_CACHE).current(resolved.model_id, stamp) is None:
        return None
    if refresh.due(recalled_at(runtime, target.reference), seconds):
        runtime.get(refresh.REFRESHER).ahead(target)
    return Target(resolved.model_id, target.reference, resolved, stamp)


def _row_encoder(loaded: models.LoadedModel) -> Encoder:
    encoder = loaded.extras.get("row_encoder")
    if encoder is None:
        encoder = loaded.extras["row_encoder"] = Encoder.from_dict(loaded.encoding)
    return encoder


LogSink = Callable[[list[Any], np.ndarray, np.ndarray, np.ndarray, Any], Any]


def _log_sink(runtime: Runtime, target: Target) -> LogSink | None:
    """Where this request's scored rows go: the prediction log's queue (one tuple appended;
    app.monitoring.log), or None when the log is off."""
    writer = prediction_log.writer(runtime)
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


def _shadow_sink(runtime: Runtime, target: Target) -> shadow.Sink | None:
    """A running shadow's queue when the request named its registered model by the default or
    ``production`` reference (a cached look-up, no I/O); else None."""
    resolved = target.resolved
    if resolved is None:
        return None
    return shadow.sink(runtime, target.model_id, resolved.name, target.reference)


@dataclass(frozen=True)
class Sinks:
    """Where a request's scored rows go: the prediction log, a running shadow (each None when
    off)."""

    log: LogSink | None = None
    shadow: shadow.Sink | None = None


def sinks_for(runtime: Runtime, target: Target) -> Sinks:
    """The sinks of a request for ``target`` (resolved) on ``runtime``'s database."""
    return Sinks(_log_sink(runtime, target), _shadow_sink(runtime, target))


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


def _predictions(scores: Scores, ids: list[Any]) -> list[dict[str, Any]]:
    """The answer's predictions, built column-wise from the core's arrays."""
    label_of = scores.labels()
    clip_of = scores.clipped.tolist()
    own = scores.own_decision().tolist()
    rows = scores.decision.tolist() if scores.decision.ndim == 2 else [None] * scores.n
    columns = [ids, clip_of, label_of, own, rows]
    keys = ["id", "clipped", "label", "decision_value", "decision_values"]
    keys += ["probability", "probabilities"]
    probability = scores.own_probability()
    if probability is None:  # (an uncalibrated model: null, the answer's shape the same)
        columns += [[None] * scores.n] * 2
    else:
        assert scores.probabilities is not None
        classes = [str(c) for c in scores.classes]
        columns += [
            probability.tolist(),
            [dict(zip(classes, p, strict=True)) for p in scores.probabilities.tolist()],
        ]
    if scores.contributions is not None:
        columns.append(scores.contributions.rows())
        keys.append("explanation")
    return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]


def _true_labels(
    loaded: models.LoadedModel, labels: list[Any] | None, n: int, loc: list[str | int]
) -> np.ndarray | None:
    """The true labels as the model's classes (checked before anything is scored)."""
    if labels is None:
        return None
    if len(labels) != n:
        raise invalid(loc, f"{len(labels)} labels for {n} rows; give one per row")
    classes = loaded.estimator.classes_
    return classes[models.match_labels(classes, labels, loc)]


def decision_for(
    loaded: models.LoadedModel,
    target: Target,
    rule: str | None = None,
    threshold: float | None = None,
    loc: list[str | int] | None = None,
) -> Decision:
    """The decision rule that labels a request's rows (app.models.decisions): its own
    override (``rule`` "argmax" or ``threshold``; 422 naming it under ``loc`` when the model
    cannot take it), else the rule of the alias its reference named, else the model's."""
    est = loaded.estimator
    try:
        override = override_rule(est.calibrated, len(est.classes_), rule, threshold)
    except RuleError as exc:
        raise invalid([*(loc or ["body"]), exc.field], exc.message) from None
    alias_rule = target.resolved.rule if target.resolved is not None else None
    return choose(est.calibrated, len(est.classes_), loaded.rule, alias_rule, override)


def score_batch(
    loaded: models.LoadedModel,
    X: Any,
    ids: list[Any] | None,
    ids_loc: list[str | int],
    sinks: Sinks,
    *,
    explain: bool = False,
    rule: Decision | None = None,
) -> tuple[Scores, list[Any]]:
    """The core's scores of X (the request's own rows, scaled in place) and the rows' ids
    (the client's, checked: one per row), the scored rows sent to the prediction log and, with
    their encoded rows, to a running shadow's challenger (app.monitoring.shadow), if any. Every
    door scores through here: a request refused before it is not recorded."""
    ids = row_ids(ids, X.shape[0], ids_loc)
    raw = X.copy() if sinks.shadow is not None else None
    scores = score(loaded, X, explain=explain, rule=rule)
    if sinks.log is not None:  # (the scaled rows by reference, for feature drift, when the
        # model has min-max scaling)
        scaled = scores.scaled if loaded.scaling is not None else None
        sinks.log(ids, scores.decision, scores.index, scores.clipped, scaled)
    if sinks.shadow is not None:
        sinks.shadow(raw, ids, scores.decision, scores.index, scores.clipped)
    return scores, ids


def _respond(
    loaded: models.LoadedModel,
    X: Any,
    labels: list[Any] | None,
    labels_loc: list[str | int],
    ids: list[Any] | None,
    sinks: Sinks,
    explain: bool = False,
    rule: Decision | None = None,
) -> dict[str, Any]:
    """The PredictResponse body as plain JSON values, built column-wise from the core's
    arrays (see ``score_batch``), labelled by ``rule`` (``decision_for``)."""
    est = loaded.estimator
    ids_loc = [*labels_loc[:-1], "ids"]
    ids = row_ids(ids, X.shape[0], ids_loc)
    y_true = _true_labels(loaded, labels, X.shape[0], labels_loc)
    scores, ids = score_batch(loaded, X, ids, ids_loc, sinks, explain=explain, rule=rule)
    with gc_paused():
        predictions = _predictions(scores, ids)
    response: dict[str, Any] = {
        "model_id": loaded.id,
        "classes": list(scores.classes),
        "n": len(predictions),
        "predictions": predictions,
        "accuracy": None,
        "margins": None,
        "decision_rule": scores.rule_json(),
    }
    if scores.contributions is not None:
        response["explanation"] = scores.contributions.summary()
    if y_true is not None:
        predicted = est.classes_[scores.index]
        response["accuracy"] = float(np.mean(predicted == y_true))
        response["margins"] = jsonable(est.margins(scores.scaled, y_true, decision=scores.decision))
    return response


def predict_rows(
    runtime: Runtime,
    *,
    target: Target,
    instances: list[Any],
    labels: list[Any] | None,
    settings: Settings,
    ids: list[Any] | None = None,
    explain: bool = False,
    rule: str | None = None,
    threshold: float | None = None,
) -> dict[str, Any]:
    """The PredictResponse body for raw rows or records (see ``_respond``); ``instances`` may
    be a large body's rows still as bytes (``[NumericRows]``, see app.predict.numeric_rows).
    ``rule``/``threshold``: the request's own decision rule (``decision_for``)."""
    block = instances[0] if len(instances) == 1 else None
    if not isinstance(block, NumericRows):
        block = None
    elif block.n_rows > settings.max_predict_instances:  # (an upper bound: count them exactly)
        instances, block = block.rows_list(), None
    check_rows(block.n_rows if block else len(instances), settings, "instances")
    loaded, target = _rows_model(runtime, target, ["body", "model_id"])
    if explain:  # its cost bounded before anything is encoded
        n = block.n_rows if block else len(instances)
        check_explain_cost(loaded, n, settings, ["body", "explain"])
    decision = decision_for(loaded, target, rule, threshold)
    sinks = sinks_for(runtime, target)
    X = encode_rows(loaded, instances, ["body", "instances"])
    answer = _respond(loaded, X, labels, ["body", "labels"], ids, sinks, explain, decision)
    return answer | reference_fields(target)


def encode_rows(loaded: models.LoadedModel, instances: list[Any], loc: list[str | int]) -> Any:
    """Raw rows or records (or ``[NumericRows]``) encoded with the model's stored encoding,
    checked: finite, of the model's width (422 naming ``loc`` and the row otherwise)."""
    encoder = _row_encoder(loaded)
    block = instances[0] if len(instances) == 1 else None
    if isinstance(block, NumericRows):
        X = encoder.transform_matrix(block.matrix()) if encoder.plain_numeric else None
        if X is not None:  # finite, of the model's width: nothing left to check
            return X
        instances = block.rows_list()  # not a rectangle of numbers this model takes
    try:
        X = encoder.transform_rows(instances)
    except IngestError as exc:
        where: list[str | int] = list(loc)
        if exc.row is not None:
            where.append(exc.row)
        raise ingest_problem(exc, where) from exc
    check_matrix(X, loaded, loc)
    return X


def encode_matrix(loaded: models.LoadedModel, A: np.ndarray, loc: list[str | int]) -> Any:
    """Rows already one numeric array (n, k) (a protocol's tensor), encoded as ``encode_rows``
    encodes them, without a Python object per number when the model takes them as they are."""
    A = np.asarray(A, dtype=np.float64)
    if not A.flags.writeable:  # (a view of the request's bytes: the core scales in place)
        A = A.copy()
    X = _row_encoder(loaded).transform_matrix(A) if np.isfinite(A).all() else None
    if X is None:  # not what this model takes as it is: the rows' path explains why
        return encode_rows(loaded, A.tolist(), loc)
    return X


def predict_file(
    session: Session,
    *,
    target: Target,
    content: bytes,
    filename: str,
    label: str | int | None,
    settings: Settings,
    ids: list[Any] | None = None,
    explain: bool = False,
    on_error: str = "fail",
    rule: str | None = None,
    threshold: float | None = None,
) -> dict[str, Any]:
    """The PredictResponse body for an uploaded file (see ``_respond``); ``on_error="skip"``
    leaves out the rows that cannot be encoded and lists the first ``SKIPPED_SHOWN`` of them
    (``skipped``), their ``ids`` with them."""
    check_upload_size(len(content), settings)
    loaded, target = _target_loaded(session, target, ["body", "model_id"])
    decision = decision_for(loaded, target, rule, threshold)
    check_not_blank(not content or content.isspace())  # (not strip(): no copy of the upload)
    # the row limit is checked as the file is read (before it is parsed whole)
    limits = Limits(max_rows=settings.max_predict_instances,
                    max_encoded_bytes=settings.max_encoded_bytes)
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
    check_rows(X.shape[0], settings, "file")
    check_has_rows(X.shape[0])
    check_matrix(X, loaded, ["body", "file"])
    if explain:
        check_explain_cost(loaded, X.shape[0], settings, ["body", "explain"])
    labels = None if y is None else list(np.asarray(y).tolist())
    sinks = sinks_for(runtime_of(session), target)
    answer = _respond(loaded, X, labels, ["body", "label"], ids, sinks, explain, decision)
    if skipped is not None:
        answer["skipped"] = skipped
    return answer | reference_fields(target)
