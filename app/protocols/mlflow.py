"""MLflow's scoring protocol: ``POST /models/{ref}/invocations`` with a pandas-style JSON
payload (``app.protocols.mlflow_inputs``) or a CSV table, answered ``{"predictions": [...]}``
with each row's id, label and decision value, as /predict gives them (ids from
``params.ids``, else ``"{X-Request-ID}:{row}"``; logged, and shadow-scored, as /predict's). A
key of scope ``read`` when keys are in use, as for /predict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.fastjson import OrjsonRequest, gc_paused, json_response, loads
from app.core.problems import Problem, ingest_problem, problem_responses
from app.core.validation import json_containers, rows_and_columns_why
from app.datasets.service import check_has_rows, check_not_blank, check_upload_size
from app.ingest import IngestError, Limits, parse_feature_file
from app.predict.schemas import WDBC_BENIGN, WDBC_COLUMNS, WDBC_MALIGNANT, Prediction
from app.protocols import mlflow_inputs
from app.protocols.errors import MLFLOW_TYPE, as_client_error, mlflow_error
from app.protocols.rules import request_rule
from app.registry.canary import ROUTE_KEY_HEADER
from app.registry.references import BARE_NAME
from app.serving import lanes
from app.serving.codec import check_matrix, decision_for, encode_rows
from app.serving.lanes import INLINE_BODY_BYTES
from app.serving.model import ServedModel
from app.serving.scoring import Scores, check_rows, records, row_ids
from app.serving.serve import Batch, serve
from app.serving.sinks import Scored
from app.serving.target import Target, answer_headers, route_key

router = APIRouter(tags=["inference protocol (MLflow)"])

JSON, CSV = "application/json", "text/csv"


class Predictions(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "predictions": [
                        {
                            "id": "patient-17",
                            "clipped": False,
                            "label": 2,
                            "decision_value": 0.7088,
                            "decision_values": None,
                            "margin": 0.7088,
                        }
                    ]
                }
            ]
        }
    )

    predictions: list[Prediction]


@dataclass(frozen=True)
class JsonCall:
    """A JSON payload's rows (app.protocols.mlflow_inputs), ids and method."""

    key: str  # the payload's member that held the rows (named in errors)
    rows: list[Any]
    ids: list[Any] | None
    method: str  # predict or predict_proba
    rule: str | None = None
    threshold: float | None = None


class JsonDoor:
    """MLflow's pandas-style JSON payload: rows in, ``predictions`` out (each row's record as
    /predict's, or with ``predict_proba`` each row's class probabilities)."""

    def admit(self, call: JsonCall, settings: Settings) -> None:
        try:
            check_rows(len(call.rows), settings, "instances")
        except Problem as problem:
            raise as_client_error(problem, call.key, v2=False) from None

    def decode(
        self, call: JsonCall, model: ServedModel, target: Target, settings: Settings
    ) -> Batch:
        if call.method == "predict_proba" and not model.calibrated:
            raise mlflow_error(
                400,
                f"model {model.id} has no probabilities (trained with calibration none); "
                "use predict_method predict",
            )
        rule = decision_for(model, target, call.rule, call.threshold)
        X = encode_rows(model, call.rows, ["body", "instances"])
        return Batch(X, row_ids(call.ids, X.shape[0], ["body", "ids"]), ("body", "ids"), rule)

    def encode(self, call: JsonCall, batch: Batch, scored: Scored) -> Answer:
        scores = scored.scores
        if call.method == "predict_proba":
            assert scores.probabilities is not None
            return (scores.probabilities.tolist(), _rule_name(scores), scores.n_clipped,
                    answer_headers(scored.target))
        with gc_paused():
            return (records(scores, scored.ids), _rule_name(scores), scores.n_clipped,
                    answer_headers(scored.target))

    def refused(self, call: JsonCall, problem: Problem, stage: str) -> Exception:
        if stage == "acquire":
            return _not_found(problem)
        if problem.type == MLFLOW_TYPE:
            return problem
        return as_client_error(problem, call.key, v2=False)


class CsvDoor:
    """A CSV table with a header (``text/csv``): read as /predict/file reads a file."""

    def admit(self, body: bytes, settings: Settings) -> None:
        try:
            check_upload_size(len(body), settings)
        except Problem as problem:
            raise as_client_error(problem, "csv", v2=False) from None

    def decode(self, body: bytes, model: ServedModel, target: Target, settings: Settings
               ) -> Batch:
        check_not_blank(not body or body.isspace())
        limits = Limits(max_rows=settings.max_predict_instances,
                        max_encoded_bytes=settings.max_encoded_bytes)
        try:
            X, _ = parse_feature_file(model.encoding, body, "invocations.csv", limits=limits)
        except IngestError as exc:
            raise ingest_problem(exc, ["body", "file"]) from exc
        check_rows(X.shape[0], settings, "file")
        check_has_rows(X.shape[0])
        check_matrix(X, model, ["body", "file"])
        rule = decision_for(model, target)
        return Batch(X, row_ids(None, X.shape[0], ["body", "ids"]), ("body", "ids"), rule)

    def encode(self, body: bytes, batch: Batch, scored: Scored) -> Answer:
        scores = scored.scores
        with gc_paused():
            return (records(scores, scored.ids), _rule_name(scores), scores.n_clipped,
                    answer_headers(scored.target))

    def refused(self, body: bytes, problem: Problem, stage: str) -> Exception:
        if stage == "acquire":
            return _not_found(problem)
        return as_client_error(problem, "csv", v2=False)


# The predictions, the X-Decision-Rule header's rule name and X-Rows-Clipped's count
Answer = tuple[list[Any], str, int, dict[str, str]]  # (+ app.serving.target.answer_headers)
JSON_DOOR, CSV_DOOR = JsonDoor(), CsvDoor()


def _not_found(problem: Problem) -> Problem:
    """The path's model not found (a malformed reference too): MLflow's 404."""
    errors = problem.errors or []
    return mlflow_error(404, str(errors[0]["message"]) if errors else problem.detail)


def _rule_name(scores: Scores) -> str:
    """The ``X-Decision-Rule`` header: the name of the rule that made the labels (ASCII)."""
    name = scores.rule_json().get("name", "")
    return name.encode("ascii", "backslashreplace").decode("ascii")


def _json_call(request: Request, body: bytes) -> JsonCall:
    state = request.app.state
    rows, columns = state.settings.max_predict_instances, state.settings.max_features
    count = json_containers(body, rows + columns + 16)  # a row or a column each, and a few
    if count > rows + columns + 16:
        raise mlflow_error(
            413,
            f"the body holds {count} JSON arrays and objects, more than {rows + columns + 16}: "
            f"{rows_and_columns_why(rows, columns)}",
        )
    try:
        payload = loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise mlflow_error(400, f"the body is not valid JSON: {exc}") from None
    key, rows, ids, method = mlflow_inputs.instances(payload, state.settings)
    rule, threshold = request_rule(payload.get("params") or {}, mlflow_error, "params")
    return JsonCall(key, rows, ids, method, rule, threshold)


def _media(content_type: str) -> str:
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in (JSON, CSV):
        raise mlflow_error(
            415,
            f"this endpoint takes the content types {JSON} and {CSV}; got "
            f"{json.dumps(content_type or None)}",
        )
    return media


def _response(answer: Answer) -> Response:
    predictions, rule, clipped, headers = answer
    response = json_response({"predictions": predictions})
    response.headers.update(headers)  # the version that answered (and a canary's arm)
    response.headers["X-Decision-Rule"] = rule  # the rule that made the labels (issue 44)
    response.headers["X-Rows-Clipped"] = str(clipped)  # rows outside the training range
    return response


def _target(request: Request, ref: str, call: JsonCall | None = None) -> Target:
    """The reference; an alias's canary arm chosen by the ``X-Msvmav-Route-Key`` header, else
    by a JSON payload's first id."""
    key = route_key(request.headers.get(ROUTE_KEY_HEADER), call.ids if call else None)
    return Target(reference=ref, routed=True, route_key=key)


def _invocations(request: Request, body: bytes, content_type: str, ref: str) -> Response:
    runtime = request.app.state.runtime
    if _media(content_type) == JSON:
        call = _json_call(request, body)
        answer = serve(runtime, JSON_DOOR, call, _target(request, ref, call), loc=None)
    else:
        answer = serve(runtime, CSV_DOOR, body, _target(request, ref), loc=None)
    return _response(answer)


_EXAMPLES = {
    "dataframe_split": {
        "summary": "pandas orient=split (model 1 of the README: wdbc)",
        "value": {"dataframe_split": {"columns": WDBC_COLUMNS, "data": [WDBC_MALIGNANT]}},
    },
    "dataframe_records": {
        "summary": "pandas orient=records",
        "value": {"dataframe_records": [dict(zip(WDBC_COLUMNS, WDBC_BENIGN, strict=True))]},
    },
    "instances": {
        "summary": "rows in training column order",
        "value": {"instances": [WDBC_MALIGNANT, WDBC_BENIGN]},
    },
    "inputs": {
        "summary": "one list per column",
        "value": {"inputs": {c: [v] for c, v in zip(WDBC_COLUMNS, WDBC_BENIGN, strict=True)}},
    },
}

# rows (lists or records), or an object of columns: {column: [values]}
_ROWS_OR_COLUMNS = {"anyOf": [
    {"type": "array", "minItems": 1},
    {"type": "object", "minProperties": 1, "additionalProperties": {"type": "array"}},
]}

_BODY = {
    "required": True,
    "content": {
        JSON: {
            "schema": {
                "type": "object",
                "description": "Exactly one of the keys, and optionally `params` with `ids`: "
                "the key holds at least one row (else 400: `instances holds no rows`) and "
                "`params.ids` one id per row (else 400: `4 ids for 3 rows; give one per row`); "
                "a `dataframe_split` row holds one value per column (else 400: `data[0] must be "
                "a list of 2 values, one per column`), and the columns of an object of columns "
                "are lists of one length (else 400: `the columns have different lengths`)",
                "oneOf": [{"required": [key]} for key in mlflow_inputs.KEYS],
                "additionalProperties": False,
                "properties": {
                    "dataframe_split": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "columns": {"type": "array", "items": {"type": "string"}},
                            "data": {"type": "array", "minItems": 1,
                                     "items": {"type": "array"}},
                        },
                    },
                    "dataframe_records": {"type": "array", "minItems": 1,
                                          "items": {"type": "object"}},
                    "instances": _ROWS_OR_COLUMNS,
                    "inputs": _ROWS_OR_COLUMNS,
                    "params": {
                        "type": "object",
                        "properties": {
                            "ids": {
                                "type": "array",
                                "description": "The rows' prediction ids, one per row: "
                                "strings of 1-128 characters or integers",
                                "items": {"anyOf": [
                                    {"type": "string", "minLength": 1, "maxLength": 128},
                                    {"type": "integer"}]},
                            },
                            "predict_method": {
                                "type": "string",
                                "enum": ["predict", "predict_proba"],
                                "description": "predict (default): each row's id, label, "
                                "decision value and probabilities; predict_proba: each row's "
                                "class probabilities in the order of the model's classes",
                            },
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "examples": _EXAMPLES,
        },
        CSV: {"schema": {"type": "string"}, "example": "V1,V2,...,V30\n17.99,10.38,...,0.1189\n"},
    },
}


@router.post(
    "/{model_ref:path}/invocations",  # under /models (app.routers.MODEL_PARTS)
    summary="Predict (MLflow scoring protocol)",
    description=(
        f"`{{model_ref}}`: `name@alias`, `name/version`, a stored model's id or {BARE_NAME}. "
        "Rows as MLflow's scoring server takes them (`dataframe_split`, `dataframe_records`, "
        "`instances`, `inputs`) in `application/json`, with optional `params.ids` (one "
        "prediction id per row, echoed as each prediction's `id`), or a CSV table with a "
        "header in `text/csv`. Errors are problem+json with MLflow's `error_code` and "
        "`message`: 400 for a malformed body, wrong ids or rows /predict would refuse, 415 for "
        "another content type."
    ),
    response_class=Response,
    responses={
        200: {
            "model": Predictions,
            "description": "Each row's label, decision value and probabilities (with "
            "`params.predict_method` `predict_proba`: each row's list of class probabilities)",
        },
        **problem_responses(400, 404, 413, 415),
    },
    openapi_extra={"requestBody": _BODY},
)
async def invocations(request: Request, model_ref: str) -> Response:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() == CSV:
        # unread so far (app.core.validation reads JSON bodies only): into one buffer of its
        # Content-Length, not chunks joined at the end (held once, not twice)
        body: bytes = await OrjsonRequest(request.scope, request.receive).body()
    else:
        body = await request.body()
    if len(body) > INLINE_BODY_BYTES or _media(content_type) != JSON:
        return await run_in_threadpool(_invocations, request, body, content_type, model_ref)
    # a small JSON payload: parsed on the loop, served in the lane its rows allow
    call = _json_call(request, body)
    return await lanes.serve_soon(request.app.state.runtime, JSON_DOOR, call,
                                  _target(request, model_ref, call), rows=len(call.rows),
                                  loc=None,
                                  render=_response)
