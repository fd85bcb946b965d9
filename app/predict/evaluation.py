"""``POST /models/{ref}/evaluate``: a model's metrics and curves on labelled rows — a stored
dataset with the model's features, or an uploaded file with a label column — scored through the
one scoring core and measured by ``solver.evaluation`` (app.models.evaluating); the curves drawn
as PNG or SVG (app.models.figures)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.problems import ingest_problem, invalid
from app.core.runtime import runtime_of
from app.datasets import service as datasets
from app.datasets.service import check_has_rows, check_not_blank, check_upload_size
from app.ingest import IngestError, Limits, parse_feature_file
from app.models import service as models
from app.models.evaluating import check_importance_cost, evaluate_rows
from app.models.figures import render_curves
from app.models.scoring import check_rows
from app.predict.service import check_matrix
from app.predict.target import Target, reference_fields, resolve_target

_REF: list[str | int] = ["path", "model_ref"]


def _dataset_rows(
    session: Session, model: models.LoadedModel, dataset_id: int
) -> tuple[Any, list[Any]]:
    """A stored dataset's encoded rows and labels (422 naming ``dataset_id`` when its features
    are not the model's)."""
    loc: list[str | int] = ["body", "dataset_id"]
    dataset = datasets.get_or_raise(session, dataset_id, loc)
    row = models.get_or_raise(session, model.id)
    if list(dataset.feature_names) != list(row.feature_names):
        raise invalid(
            loc,
            f"dataset {dataset_id}'s {dataset.n_features} features differ from model "
            f"{model.id}'s {row.n_features}",
        )
    X, y = datasets.load_arrays(session, dataset)
    X = model.impute(X)  # its missing cells (NaN): the model's fills
    session.commit()  # read-only: end the transaction before computing
    return X, y.tolist()


def _file_rows(
    model: models.LoadedModel, content: bytes, filename: str, label: str | None, settings: Settings
) -> tuple[Any, list[Any]]:
    """An uploaded file's encoded rows and its label column (422 naming ``label`` without one)."""
    check_upload_size(len(content), settings)
    check_not_blank(not content or content.isspace())
    try:
        X, y = parse_feature_file(
            model.encoding,
            content,
            filename,
            label=label,
            limits=Limits(max_encoded_bytes=settings.max_encoded_bytes),
        )
    except IngestError as exc:
        field = "label" if exc.field == "label" else "file"
        raise ingest_problem(exc, ["body", field]) from exc
    check_rows(X.shape[0], settings, "file")
    check_has_rows(X.shape[0])
    if y is None:
        raise invalid(
            ["body", "label"],
            "the file has no label column: evaluating needs the true labels (name the column "
            "in `label`, or use the training file's label name)",
        )
    check_matrix(X, model, ["body", "file"])
    return X, list(np.asarray(y).tolist())


def evaluate_model(
    session: Session,
    *,
    ref: str,
    dataset_id: int | None,
    upload: tuple[bytes, str] | None,
    label: str | None,
    settings: Settings,
    with_importance: bool = False,
) -> dict[str, Any]:
    """The evaluation's answer: the model that answered, where the rows came from, ``metrics``
    (as the model detail's ``evaluation``) and ``curves`` (ROC, PR, reliability)."""
    if (dataset_id is None) == (upload is None):
        raise invalid(["body", "dataset_id"], "give exactly one of dataset_id and file")
    target = resolve_target(runtime_of(session), Target(reference=ref), _REF)
    assert target.model_id is not None
    loaded = models.load_cached(session, target.model_id, None, target.stamp)
    if session.in_transaction():  # a cache miss read the model
        session.commit()
    if dataset_id is not None:
        X, labels = _dataset_rows(session, loaded, dataset_id)
        loc: list[str | int] = ["body", "dataset_id"]
    else:
        assert upload is not None
        X, labels = _file_rows(loaded, upload[0], upload[1], label, settings)
        loc = ["body", "label"]
    if with_importance:
        check_importance_cost(loaded, len(labels), settings, ["body", "importance"])
    return {
        "model_id": loaded.id,
        **reference_fields(target),
        "source": "dataset" if dataset_id is not None else "file",
        "dataset_id": dataset_id,
        "n": len(labels),
        **evaluate_rows(loaded, X, labels, loc, with_importance=with_importance),
    }


def evaluation_figure(answer: dict[str, Any], fmt: str) -> bytes:
    """The answer's curves as one PNG or SVG figure."""
    where = f"dataset {answer['dataset_id']}" if answer["source"] == "dataset" else "file"
    title = f"model {answer['model_id']} on {where} (n={answer['n']})"
    return render_curves(answer["curves"], title=title, fmt=fmt)
