"""/predict routes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, File, Form, Request, Response, UploadFile

from app.core.deps import RuntimeDep, SessionDep, SettingsDep
from app.core.fastjson import OrjsonRequest, OrjsonRoute, json_response
from app.core.forms import KNOWN_FORM_FIELDS
from app.core.ids import MAX_DB_ID
from app.core.plotting import IMAGE_TYPES, image_response_doc
from app.core.problems import problem_responses
from app.predict import evaluation, inline, service
from app.predict.numeric_rows import check_body, split_body
from app.predict.schemas import (
    IDS_TEXT_PATTERN,
    WDBC_BENIGN,
    WDBC_COLUMNS,
    WDBC_MALIGNANT,
    EvaluationOut,
    ExplainRequest,
    PredictRequest,
    PredictResponse,
)
from app.registry.references import BARE_NAME
from app.serving.target import route_key, target_of


class PredictBody(OrjsonRequest):
    # A large body's rows stay bytes until the model is known (app.predict.numeric_rows).
    parse_first = staticmethod(split_body)
    check_first = staticmethod(check_body)  # the row limit, before any parse


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
        "the training data. Each prediction carries the label, the decision value and, for a "
        "calibrated model, the label's `probability` and every class's `probabilities`; with "
        "true `labels` the answer adds accuracy and the batch's margin statistics; with "
        "`explain: true`, each row's contributions per raw input column."
    ),
    response_model=PredictResponse,
    responses=problem_responses(404, 413, 422),
)
async def predict(
    http: Request,
    request: Annotated[PredictRequest, Body(openapi_examples=_PREDICT_EXAMPLES)],
) -> Response:
    # No session or settings dependency: a warm /predict needs no ORM session (the model's
    # existence is checked on a pooled connection; see app.serving.acquire), and
    # each dependency costs FastAPI's solver a measurable share of a one-row request. A valid
    # one-row request usually never gets here: app.predict.fast_path answers it first.
    return await inline.answer(http.app.state.runtime, request,
                               http.headers.get(inline.ROUTE_KEY_HEADER))


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
    http: Request,
    runtime: RuntimeDep,
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
            f"(e.g. `wdbc@production`), `name/version` or {BARE_NAME}",
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
            "characters) or integers, echoed as each prediction's `id`; without them `\"{X-"
            'Request-ID}:{row}"`',
            examples=[""],
            json_schema_extra={"pattern": IDS_TEXT_PATTERN},
        ),
    ] = None,
    explain: Annotated[
        bool,
        Form(description="Add each row's explanation, as /predict's `explain`"),
    ] = False,
    on_error: Annotated[
        Literal["fail", "skip"],
        Form(
            description="A row that cannot be encoded (a missing value, not a number, an "
            "unknown category) answers 422 (fail) or is left out and listed in `skipped` "
            "(skip: its row, line, column and reason; the first 100)",
            examples=["fail"],
        ),
    ] = "fail",
    rule: Annotated[
        str | None,
        Form(max_length=16, description="This request's decision rule, as /predict's `rule` "
             "(`argmax`)", examples=[""]),
    ] = None,
    threshold: Annotated[
        float | None,
        Form(ge=0, le=1, allow_inf_nan=False, examples=[""],
             description="This request's threshold on P(classes[1]), as /predict's `threshold`"),
    ] = None,
) -> Response:
    form_ids = service.form_ids(ids)
    key = route_key(http.headers.get(inline.ROUTE_KEY_HEADER), form_ids)
    return service.answered(
        service.predict_file(
            runtime,
            target_of(model_id, (model or "").strip() or None, ["body", "model"], routed=True,
                      route_key=key),
            service.FileRequest(
                content=file.file.read(),
                filename=file.filename or "",
                label=(label or "").strip() or None,
                ids=form_ids,
                explain=explain,
                on_error=on_error,
                rule=(rule or "").strip() or None,
                threshold=threshold,
            ),
        )
    )


# Doors that read a model by reference: evaluation and explanation (read-only, like /predict),
# a part of the /models router (app.routers.MODEL_PARTS declares the prefix).
models_router = APIRouter(tags=["models"])

_EVALUATE_DOC = (
    "`{model_ref}`: a stored model's id or a registry reference (`name@alias`, `name/version`, "
    "`name`). Rows: exactly one of `dataset_id` (a stored dataset with the model's features) "
    "and `file` (any upload format, with a label column: the training label's name or "
    "`label`). The model scores them through the same core as /predict; the metrics are the "
    "model detail's `evaluation` (accuracy, balanced accuracy, the majority-class baseline, "
    "ROC and PR AUC, log loss, Brier score, expected calibration error, the confusion matrix, "
    "per-class precision/recall/F1/support; each as sklearn.metrics computes it)."
)


def _evaluate_form(
    session: SessionDep,
    settings: SettingsDep,
    model_ref: str,
    file: Annotated[UploadFile | None, File(description="Labelled rows to evaluate on")] = None,
    dataset_id: Annotated[
        int | None,
        Form(ge=1, le=MAX_DB_ID, description="Stored dataset to evaluate on (or give `file`)",
             examples=[1]),
    ] = None,
    label: Annotated[
        str | None, Form(description="Label column of the file (name, or 0-based index)")
    ] = None,
    importance: Annotated[
        bool,
        Form(
            description="Add the permutation importance per raw input column (the accuracy "
            "lost when it is shuffled; 422 beyond MSVMAV_MAX_EXPLAIN_WORK)"
        ),
    ] = False,
    rows: Annotated[
        Literal["holdout", "all"] | None,
        Form(
            description="Which rows of `dataset_id` to score: `holdout` (the default on the "
            "model's own dataset) only the rows it did not train on (its detail's "
            "`holdout.rows`; 422 when it kept none); `all` every row (the default on any other "
            "dataset, and for a file)"
        ),
    ] = None,
) -> dict[str, Any]:
    upload = None if file is None else (file.file.read(), file.filename or "")
    return evaluation.evaluate_model(
        session,
        ref=model_ref,
        dataset_id=dataset_id,
        upload=upload,
        label=(label or "").strip() or None,
        settings=settings,
        with_importance=importance,
        rows=rows,
    )


EvaluationDep = Annotated[dict[str, Any], Depends(_evaluate_form)]


@models_router.post(
    "/{model_ref:path}/evaluate",
    summary="Evaluate a model on labelled rows",
    description=_EVALUATE_DOC + " Curves: ROC and precision-recall (from the decision values) "
    "and reliability (from the probabilities), one per class one-vs-rest (two classes: "
    "classes[1]).",
    response_model=EvaluationOut,
    responses=problem_responses(404, 413, 422),
)
def evaluate_model(answer: EvaluationDep) -> Response:
    return json_response(answer)


def _evaluation_image(fmt: str):
    def handler(answer: EvaluationDep) -> Response:
        return Response(evaluation.evaluation_figure(answer, fmt), media_type=IMAGE_TYPES[fmt])

    return handler


for _fmt in IMAGE_TYPES:
    models_router.post(
        f"/{{model_ref:path}}/evaluate.{_fmt}",
        name=f"evaluate_model_{_fmt}",
        summary=f"Evaluate a model on labelled rows ({_fmt.upper()} figure)",
        description=_EVALUATE_DOC + " The ROC, precision-recall and reliability curves drawn.",
        response_class=Response,
        responses={200: image_response_doc(_fmt), **problem_responses(404, 413, 422)},
    )(_evaluation_image(_fmt))


@models_router.post(
    "/{model_ref:path}/explain",
    summary="Explain a model's answers for rows",
    description="`{model_ref}` as for evaluation. /predict's answer with `explain: true`: per "
    "row, one contribution per raw input column (a categorical column's one-hot columns "
    "summed) and the decision value at the stated baseline (the training part's column "
    "means), which they add up to within 1e-6: exactly w_j (x_j - baseline_j) for linear "
    "models, integrated gradients along the straight path from the baseline (computed in "
    "closed form) for RBF and polynomial kernels. Refused (422 naming `explain`) when rows x "
    "the method's work exceed MSVMAV_MAX_EXPLAIN_WORK, before anything is computed.",
    response_model=PredictResponse,
    responses=problem_responses(404, 413, 422),
)
def explain_rows(http: Request, model_ref: str, request: ExplainRequest) -> Response:
    state = http.app.state
    return json_response(
        service.predict_rows(
            state.runtime,
            target_of(None, model_ref, ["path", "model_ref"]),
            service.RowsRequest(instances=request.instances, ids=request.ids, explain=True),
        )
    )
