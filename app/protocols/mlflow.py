"""MLflow's scoring protocol: ``POST /models/{ref}/invocations`` with a pandas-style JSON
payload (``app.protocols.mlflow_inputs``) or a CSV table, answered ``{"predictions": [...]}``
with each row's id, label and decision value, as /predict gives them (ids from
``params.ids``, else ``"{X-Request-ID}:{row}"``; logged, and shadow-scored, as /predict's). A
key of scope ``read`` when keys are in use, as for /predict.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from app.core.problems import Problem, problem_responses
from app.core.validation import json_containers, rows_and_columns_why
from app.predict import service as predict
from app.predict.fastjson import OrjsonRequest, json_response, loads
from app.predict.schemas import WDBC_BENIGN, WDBC_COLUMNS, WDBC_MALIGNANT, Prediction
from app.predict.target import Target
from app.protocols import mlflow_inputs
from app.protocols.errors import as_client_error, mlflow_error
from app.protocols.rules import request_rule
from app.registry.references import BARE_NAME, ResolvedModel, UnknownReference, resolve

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
                        }
                    ]
                }
            ]
        }
    )

    predictions: list[Prediction]


def _resolved(request: Request, ref: str) -> ResolvedModel:
    with request.app.state.read_session_factory() as session:
        try:
            return resolve(session, ref)
        except UnknownReference as exc:
            raise mlflow_error(404, str(exc)) from None


def _rule_name(answer: dict[str, Any]) -> str:
    """The ``X-Decision-Rule`` header: the name of the rule that made the labels (ASCII)."""
    name = (answer.get("decision_rule") or {}).get("name", "")
    return name.encode("ascii", "backslashreplace").decode("ascii")


def _from_json(
    request: Request, model: ResolvedModel, ref: str, body: bytes
) -> tuple[list[Any], str]:
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
    try:
        answer = predict.predict_rows(
            state.runtime,
            target=Target(model.model_id, ref, model),
            instances=rows,
            labels=None,
            settings=state.settings,
            ids=ids,
            rule=rule,
            threshold=threshold,
        )
    except Problem as problem:
        raise as_client_error(problem, key, v2=False) from None
    if method == "predict_proba":
        return _probabilities(answer, model), _rule_name(answer)
    return answer["predictions"], _rule_name(answer)


def _probabilities(answer: dict[str, Any], model: ResolvedModel) -> list[Any]:
    """Each row's class probabilities in the order of ``classes`` (MLflow's pyfunc answer for
    predict_proba); 400 for a model fitted without calibration."""
    predictions = answer["predictions"]
    if predictions and predictions[0]["probabilities"] is None:
        raise mlflow_error(
            400,
            f"model {model.model_id} has no probabilities (trained with calibration none); "
            "use predict_method predict",
        )
    keys = [str(c) for c in answer["classes"]]
    return [[p["probabilities"][k] for k in keys] for p in predictions]


def _from_csv(
    request: Request, model: ResolvedModel, ref: str, body: bytes
) -> tuple[list[Any], str]:
    state = request.app.state
    with state.read_session_factory() as session:
        try:
            answer = predict.predict_file(
                session,
                target=Target(model.model_id, ref, model),
                content=body,
                filename="invocations.csv",
                label=None,
                settings=state.settings,
            )
        except Problem as problem:
            raise as_client_error(problem, "csv", v2=False) from None
    return answer["predictions"], _rule_name(answer)


def _invocations(request: Request, body: bytes, content_type: str, ref: str) -> Response:
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in (JSON, CSV):
        raise mlflow_error(
            415,
            f"this endpoint takes the content types {JSON} and {CSV}; got "
            f"{json.dumps(content_type or None)}",
        )
    model = _resolved(request, ref)
    read = _from_json if media == JSON else _from_csv
    predictions, rule = read(request, model, ref, body)
    response = json_response({"predictions": predictions})
    response.headers["X-Decision-Rule"] = rule  # the rule that made the labels (issue 44)
    return response


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

_BODY = {
    "required": True,
    "content": {
        JSON: {
            "schema": {
                "type": "object",
                "description": "Exactly one of the keys, and optionally `params` with `ids`",
                "properties": {
                    "dataframe_split": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "columns": {"type": "array", "items": {"type": "string"}},
                            "data": {"type": "array", "items": {"type": "array"}},
                        },
                    },
                    "dataframe_records": {"type": "array", "items": {"type": "object"}},
                    "instances": {"anyOf": [{"type": "array"}, {"type": "object"}]},
                    "inputs": {"anyOf": [{"type": "array"}, {"type": "object"}]},
                    "params": {
                        "type": "object",
                        "properties": {
                            "ids": {
                                "type": "array",
                                "description": "The rows' prediction ids, one per row: "
                                "strings of 1-128 characters or integers",
                                "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
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
    "/models/{model_ref:path}/invocations",
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
    return await run_in_threadpool(_invocations, request, body, content_type, model_ref)
