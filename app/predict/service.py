"""/predict's and /predict/file's codecs: raw rows, records or an uploaded file decoded into the
model's encoded rows, and the core's scores encoded as the PredictResponse body. Everything
else (the model, the scoring, the prediction log, a shadow) is the serving room's
(app.serving.serve)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from fastapi import Response
from pydantic import ValidationError

from app.core.config import Settings
from app.core.fastjson import gc_paused, json_response
from app.core.jsonable import jsonable
from app.core.problems import Problem, ingest_problem, invalid
from app.core.runtime import Runtime
from app.datasets.service import check_has_rows, check_not_blank, check_upload_size
from app.ingest import (
    IngestError,
    Limits,
    parse_feature_file,
    parse_feature_file_skipping,
)
from app.predict.numeric_rows import NumericRows
from app.predict.schemas import IDS_ADAPTER
from app.serving.codec import check_matrix, decision_for, encode_rows, true_labels
from app.serving.explaining import check_explain_cost
from app.serving.model import ServedModel
from app.serving.scoring import check_rows, records, row_ids
from app.serving.serve import Batch, serve
from app.serving.sinks import Scored
from app.serving.target import Target, reference_fields, version_headers

#: Skipped rows /predict/file lists with ``on_error="skip"`` (it counts them all).
SKIPPED_SHOWN = 100
_BODY_IDS: tuple[str | int, ...] = ("body", "ids")


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


def response_body(batch: Batch, scored: Scored) -> dict[str, Any]:
    """The PredictResponse body as plain JSON values, built column-wise from the core's
    arrays; with true labels, the accuracy and the batch's margin statistics."""
    scores, model = scored.scores, scored.model
    with gc_paused():
        predictions = records(scores, scored.ids)
    response: dict[str, Any] = {
        "model_id": model.id,
        "classes": list(scores.classes),
        "n": len(predictions),
        "n_clipped": scores.n_clipped,
        "predictions": predictions,
        "accuracy": None,
        "margins": None,
        "decision_rule": scores.rule_json(),
    }
    if scores.contributions is not None:
        response["explanation"] = scores.contributions.summary()
    y_true = batch.y_true
    if y_true is not None:
        est = model.estimator
        predicted = est.classes_[scores.index]
        response["accuracy"] = float(np.mean(predicted == y_true))
        response["margins"] = jsonable(est.margins(scores.scaled, y_true, decision=scores.decision))
    if batch.extra and "skipped" in batch.extra:
        response["skipped"] = batch.extra["skipped"]
    resolved = scored.target.resolved  # the arm that answered, when the alias has a canary
    return response | reference_fields(scored.target) | {"arm": resolved.arm if resolved else None}


def answered(body: dict[str, Any]) -> Response:
    """The PredictResponse body as the JSON answer, with the headers that say which version
    answered (``X-Msvmav-Model-Version``, and ``X-Msvmav-Model-Arm`` with a canary)."""
    response = json_response(body)
    response.headers.update(version_headers(body.get("version"), body.get("arm")))
    return response


def encode_instances(loaded: ServedModel, instances: list[Any], loc: list[str | int]) -> Any:
    """Raw rows or records (or ``[NumericRows]``) encoded with the model's stored encoding,
    checked: finite, of the model's width (422 naming ``loc`` and the row otherwise)."""
    block = instances[0] if len(instances) == 1 else None
    if isinstance(block, NumericRows):
        encoder = loaded.encoder
        X = encoder.transform_matrix(block.matrix()) if encoder.plain_numeric else None
        if X is not None:  # finite, of the model's width: nothing left to check
            return X
        instances = block.rows_list()  # not a rectangle of numbers this model takes
    return encode_rows(loaded, instances, loc)


@dataclass
class RowsRequest:
    """/predict's (and /models/{ref}/explain's) request: raw rows or records."""

    instances: list[Any]
    labels: list[Any] | None = None
    ids: list[Any] | None = None
    explain: bool = False
    rule: str | None = None
    threshold: float | None = None


class RowsDoor:
    """/predict: rows in training column order, or records keyed by column name (a large
    body's rows may still be bytes: ``[NumericRows]``, see app.predict.numeric_rows)."""

    def admit(self, request: RowsRequest, settings: Settings) -> None:
        instances = request.instances
        block = instances[0] if len(instances) == 1 else None
        if isinstance(block, NumericRows):  # (an upper bound: count them exactly)
            if block.n_rows > settings.max_predict_instances:
                request.instances = block.rows_list()
            else:
                check_rows(block.n_rows, settings, "instances")
                return
        check_rows(len(request.instances), settings, "instances")

    def decode(
        self, request: RowsRequest, model: ServedModel, target: Target, settings: Settings
    ) -> Batch:
        instances = request.instances
        block = instances[0] if len(instances) == 1 else None
        n = block.n_rows if isinstance(block, NumericRows) else len(instances)
        if request.explain:  # its cost bounded before anything is encoded
            check_explain_cost(model, n, settings, ["body", "explain"])
        rule = decision_for(model, target, request.rule, request.threshold)
        X = encode_instances(model, instances, ["body", "instances"])
        ids = row_ids(request.ids, X.shape[0], list(_BODY_IDS))
        y_true = true_labels(model, request.labels, X.shape[0], ["body", "labels"])
        return Batch(X, ids, _BODY_IDS, rule, request.explain, y_true)

    def encode(self, request: RowsRequest, batch: Batch, scored: Scored) -> dict[str, Any]:
        return response_body(batch, scored)

    def refused(self, request: Any, problem: Problem, stage: str) -> Exception:
        return problem



@dataclass
class FileRequest:
    """/predict/file's request: an uploaded file in any supported format."""

    content: bytes
    filename: str
    label: str | int | None = None
    ids: list[Any] | None = None
    explain: bool = False
    on_error: str = "fail"
    rule: str | None = None
    threshold: float | None = None


class FileDoor:
    """/predict/file (and invocations' CSV): the file read with the model's stored encoding
    (``on_error="skip"`` leaves out the rows that cannot be encoded and lists the first
    ``SKIPPED_SHOWN`` of them, their ``ids`` with them)."""

    def admit(self, request: FileRequest, settings: Settings) -> None:
        check_upload_size(len(request.content), settings)

    def decode(
        self, request: FileRequest, model: ServedModel, target: Target, settings: Settings
    ) -> Batch:
        rule = decision_for(model, target, request.rule, request.threshold)
        content = request.content
        check_not_blank(not content or content.isspace())  # (not strip(): no copy of it)
        X, y, ids, skipped = _read_file(request, model, settings)
        check_rows(X.shape[0], settings, "file")
        check_has_rows(X.shape[0])
        check_matrix(X, model, ["body", "file"])
        if request.explain:
            check_explain_cost(model, X.shape[0], settings, ["body", "explain"])
        labels = None if y is None else list(np.asarray(y).tolist())
        ids = row_ids(ids, X.shape[0], list(_BODY_IDS))
        y_true = true_labels(model, labels, X.shape[0], ["body", "label"])
        extra = None if skipped is None else {"skipped": skipped}
        return Batch(X, ids, _BODY_IDS, rule, request.explain, y_true, extra)

    def encode(self, request: FileRequest, batch: Batch, scored: Scored) -> dict[str, Any]:
        return response_body(batch, scored)

    def refused(self, request: Any, problem: Problem, stage: str) -> Exception:
        return problem


def _read_file(
    request: FileRequest, model: ServedModel, settings: Settings
) -> tuple[Any, Any, list[Any] | None, dict[str, Any] | None]:
    """The file's encoded rows, labels (or None), ids and skipped rows (or None); the row
    limit is checked as the file is read (before it is parsed whole)."""
    limits = Limits(max_rows=settings.max_predict_instances,
                    max_encoded_bytes=settings.max_encoded_bytes)
    ids, skipped = request.ids, None
    try:
        if request.on_error == "skip":
            X, y, kept, errors = parse_feature_file_skipping(
                model.encoding, request.content, request.filename, label=request.label,
                limits=limits)
            skipped = {"n": len(errors), "errors": errors[:SKIPPED_SHOWN]}
            if ids is not None:
                ids = [ids[i] for i in kept] if len(ids) == len(kept) + len(errors) else ids
        else:
            X, y = parse_feature_file(model.encoding, request.content, request.filename,
                                      label=request.label, limits=limits)
    except IngestError as exc:
        field = "label" if exc.field == "label" else "file"
        raise ingest_problem(exc, ["body", field]) from exc
    return X, y, ids, skipped


ROWS, FILE = RowsDoor(), FileDoor()


def predict_rows(runtime: Runtime, target: Target, request: RowsRequest) -> dict[str, Any]:
    """The PredictResponse body for raw rows or records (app.serving.serve)."""
    return serve(runtime, ROWS, request, target)


def predict_file(runtime: Runtime, target: Target, request: FileRequest) -> dict[str, Any]:
    """The PredictResponse body for an uploaded file (app.serving.serve)."""
    return serve(runtime, FILE, request, target)
