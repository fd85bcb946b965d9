"""``POST /models/{ref}/evaluate``: a model's metrics and curves on labelled rows — a stored
dataset with the model's features, or an uploaded file with a label column — scored through the
one scoring core and measured by ``solver.evaluation`` (app.serving.evaluating); the curves drawn
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
from app.models.features import dataset_features, feature_match
from app.models.figures import render_curves
from app.serving.acquire import acquire
from app.serving.codec import check_matrix, decision_for
from app.serving.evaluating import check_importance_cost, evaluate_rows
from app.serving.model import ServedModel
from app.serving.scoring import check_rows
from app.serving.target import Target, reference_fields

_REF: list[str | int] = ["path", "model_ref"]


# ``rows`` of POST /models/{ref}/evaluate: the model's hold-out rows of its own dataset, or
# every row of the rows given. Unset: ``holdout`` on the model's own dataset, ``all`` elsewhere.
ROW_CHOICES = ("holdout", "all")


def _scored_rows(row: Any, dataset: Any, rows: str | None) -> np.ndarray | None:
    """The dataset rows to score (None: every row): the model's hold-out rows when the dataset
    is the one it trained on, unless ``rows`` is "all"; 422 naming ``rows`` when the hold-out
    is asked for but there is none to score."""
    loc: list[str | int] = ["body", "rows"]
    own = row.dataset_id is not None and row.dataset_id == dataset.id
    if rows == "all" or (rows is None and not own):
        return None
    if not own:
        raise invalid(loc, f"rows=holdout: model {row.id}'s hold-out rows are rows of dataset "
                      f"{row.dataset_id}, not of dataset {dataset.id} (use rows=all)")
    held = models.holdout_rows(row)
    if not held:
        raise invalid(loc, f"model {row.id} kept no hold-out rows of dataset {dataset.id} "
                      "(trained on every row, test_fraction null, or trained before hold-out "
                      "rows were kept): every row is one it trained on. Pass rows=all to "
                      "score them anyway (training rows: optimistic metrics)")
    index = np.asarray(held, dtype=np.int64)
    if int(index.max()) >= dataset.n_rows:
        raise invalid(loc, f"dataset {dataset.id} has {dataset.n_rows} rows now, fewer than "
                      f"when model {row.id} was trained: its hold-out rows are gone (use "
                      "rows=all)")
    return index


def _dataset_rows(
    session: Session, model: ServedModel, dataset_id: int, rows: str | None = None
) -> tuple[Any, list[Any], np.ndarray | None]:
    """A stored dataset's encoded rows and labels, only the model's hold-out rows where
    ``_scored_rows`` says so, and those rows' indices (None: every row). 422 naming
    ``dataset_id`` when its features are not the model's."""
    loc: list[str | int] = ["body", "dataset_id"]
    dataset = datasets.get_or_raise(session, dataset_id, loc)
    row = models.get_or_raise(session, model.id)
    if not feature_match(dataset, row):
        raise invalid(
            loc,
            f"dataset {dataset_id}'s {dataset.n_features} features differ from model "
            f"{model.id}'s {row.n_features}",
        )
    index = _scored_rows(row, dataset, rows)
    X, y = datasets.load_arrays(session, dataset)
    X = dataset_features(X, dataset, row)  # without the model's weight column
    if index is not None:
        X, y = X[index], y[index]
    X = model.impute(X)  # its missing cells (NaN): the model's fills
    session.commit()  # read-only: end the transaction before computing
    return X, y.tolist(), index


def _file_rows(
    model: ServedModel, content: bytes, filename: str, label: str | None, settings: Settings
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
    rows: str | None = None,
) -> dict[str, Any]:
    """The evaluation's answer: the model that answered, where the rows came from and which
    were scored (``rows``: on the model's own dataset its hold-out rows unless "all";
    ``row_indices``, null for every row), ``metrics`` (as the model detail's ``evaluation``)
    and ``curves`` (ROC, PR, reliability)."""
    if (dataset_id is None) == (upload is None):
        raise invalid(["body", "dataset_id"], "give exactly one of dataset_id and file")
    if rows is not None and rows not in ROW_CHOICES:
        raise invalid(["body", "rows"], f"rows: use one of {ROW_CHOICES}, got {rows!r}")
    if upload is not None and rows == "holdout":
        raise invalid(["body", "rows"], "rows=holdout needs the model's own dataset "
                      "(dataset_id), not a file: a file's rows are all scored")
    loaded, target = acquire(runtime_of(session), Target(reference=ref), 0.0, None,
                             ref_loc=_REF)
    index = None
    if dataset_id is not None:
        X, labels, index = _dataset_rows(session, loaded, dataset_id, rows)
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
        "rows": "all" if index is None else "holdout",
        "row_indices": None if index is None else index.tolist(),
        **evaluate_rows(loaded, X, labels, loc, with_importance=with_importance,
                        rule=decision_for(loaded, target)),  # the reference's rule (an alias's)
    }


def evaluation_figure(answer: dict[str, Any], fmt: str) -> bytes:
    """The answer's curves as one PNG or SVG figure."""
    where = f"dataset {answer['dataset_id']}" if answer["source"] == "dataset" else "file"
    if answer.get("rows") == "holdout":
        where += "'s hold-out rows"
    title = f"model {answer['model_id']} on {where} (n={answer['n']})"
    return render_curves(answer["curves"], title=title, fmt=fmt)
