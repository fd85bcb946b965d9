"""/predict routes."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, File, Form, Request, Response, UploadFile
from starlette.concurrency import run_in_threadpool

from app.core.deps import SessionDep, SettingsDep
from app.core.forms import KNOWN_FORM_FIELDS
from app.core.ids import MAX_DB_ID
from app.core.problems import problem_responses
from app.predict import inline, service
from app.predict.fastjson import OrjsonRequest, OrjsonRoute, json_response
from app.predict.numeric_rows import split_body
from app.predict.schemas import (
    WDBC_BENIGN,
    WDBC_COLUMNS,
    WDBC_MALIGNANT,
    PredictRequest,
    PredictResponse,
)
from app.predict.target import target_of


class PredictBody(OrjsonRequest):
    # A large body's rows stay bytes until the model is known (app.predict.numeric_rows).
    parse_first = staticmethod(split_body)


class PredictRoute(OrjsonRoute):
    request_class = PredictBody


# Bodies parsed and answers rendered with orjson; the answer is built as plain JSON values
# (documented by response_model, not validated again: 100k rows would be 100k models).
router = APIRouter(prefix="/predict", tags=["predict"], route_class=PredictRoute)

_PREDICT_EXAMPLES = {
    "rows": {
        "summary": "Rows in column order, with true labels (model 1 of the README: wdbc)",
        "value": {"model_id": 1, "instances": [WDBC_MALIGNANT, WDBC_BENIGN], "labels": [2, 1]},
    },
    "records": {
        "summary": "A record keyed by column name (model 1 of the README: wdbc)",
        "value": {"model_id": 1, "instances": [dict(zip(WDBC_COLUMNS, WDBC_BENIGN, strict=True))]},
    },
    "by alias": {
        "summary": "The version the README's registered model `wdbc` serves as `production`",
        "value": {"model": "wdbc@production", "instances": [WDBC_MALIGNANT], "labels": [2]},
    },
}


@router.post(
    "",
    summary="Predict rows",
    description=(
        "Raw rows are encoded with the training dataset's stored encoding, then scaled like "
        "the training data. Each prediction carries the label and the decision value; with "
        "true `labels` the answer adds accuracy and the batch's margin statistics."
    ),
    response_model=PredictResponse,
    responses=problem_responses(404, 413, 422),
)
async def predict(
    http: Request,
    request: Annotated[PredictRequest, Body(openapi_examples=_PREDICT_EXAMPLES)],
) -> Response:
    # No session or settings dependency: a warm /predict needs no ORM session (the model's
    # existence is checked on a pooled connection; see app.models.service.load_cached), and
    # each dependency costs FastAPI's solver a measurable share of a one-row request. A valid
    # one-row request usually never gets here: app.predict.fast_path answers it first.
    state = http.app.state
    target = inline.request_target(request)
    fast_answer = await inline.inline_answer(state, request, target)
    if fast_answer is not None:
        return fast_answer
    return await run_in_threadpool(inline.answer, state, request, target)


@router.post(
    "/file",
    dependencies=[KNOWN_FORM_FIELDS],
    summary="Predict a file",
    description=(
        "Multipart upload of rows in any supported format (the training file's columns, label "
        "column optional). With a label column, the answer adds accuracy and margin statistics."
    ),
    response_model=PredictResponse,
    responses=problem_responses(404, 413, 422),
)
def predict_file(
    session: SessionDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="Rows to classify")],
    model_id: Annotated[
        int | None,
        Form(ge=1, le=MAX_DB_ID, description="Stored model to use (or give `model`)", examples=[1]),
    ] = None,
    model: Annotated[
        str | None,
        Form(
            max_length=300,
            description="Registered model to use instead of `model_id`: `name@alias` "
            "(e.g. `wdbc@production`), `name/version` or `name` (its newest version)",
            examples=[""],
        ),
    ] = None,
    label: Annotated[
        str | None,
        Form(
            description="Label column in the file (name, or 0-based index as digits), if any",
            examples=["Class"],
        ),
    ] = None,
    ids: Annotated[
        str | None,
        Form(
            description="Your id of each row, as a JSON array of strings (at most 128 "
            'characters) or integers, echoed as each prediction\'s `id`; without them `"{X-'
            'Request-ID}:{row}"`',
            examples=[""],
        ),
    ] = None,
    on_error: Annotated[
        Literal["fail", "skip"],
        Form(
            description="A row that cannot be encoded (a missing value, not a number, an "
            "unknown category) answers 422 (fail) or is left out and listed in `skipped` "
            "(skip: its row, line, column and reason; the first 100)",
            examples=["fail"],
        ),
    ] = "fail",
) -> Response:
    return json_response(
        service.predict_file(
            session,
            target=target_of(model_id, (model or "").strip() or None, ["body", "model"]),
            content=file.file.read(),
            filename=file.filename or "",
            label=(label or "").strip() or None,
            settings=settings,
            ids=service.form_ids(ids),
            on_error=on_error,
        )
    )
