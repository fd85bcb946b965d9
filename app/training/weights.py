"""/train's ``class_weight`` and ``weight_column`` checked against the dataset before a job
is queued (422 naming the field): the algorithm must have a weighted form, a mapping's classes
must be the dataset's, and some class must weigh more than 0; the weight column must be a
numeric column of the dataset whose every value is finite and >= 0, weighing some training row
of every class more than 0. The weights themselves are the solver's (``solver.weights``:
scikit-learn's semantics); a class weight that is negative or not finite is refused by the
request's schema."""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from app.core.problems import invalid
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.ingest.text import preview
from app.models.features import column_position, without_column
from app.training.schemas import TrainRequest
from solver import fit_weights, param_names, split_indices

WEIGHTED = "msvmav, svm and svr"
_COLUMN: list[str | int] = ["body", "weight_column"]


def check_class_weight(dataset: Dataset, request: TrainRequest) -> None:
    """422 at ``class_weight`` (or one of its keys) when the request's class weights cannot
    be applied to this dataset's fit."""
    weights = request.class_weight
    if weights is None:
        return
    loc: list[str | int] = ["body", "class_weight"]
    if "class_weight" not in param_names(request.algorithm):
        raise invalid(loc, f"{request.algorithm} has no weighted form; class_weight is taken "
                           f"by {WEIGHTED}")
    if weights == "balanced":
        return
    classes = [str(c) for c in dataset.classes]
    for key in weights:
        if key not in classes:
            raise invalid([*loc, key], f"{key!r} is not a class of the dataset; its classes "
                                       f"are {classes}")
    if all(weights.get(c, 1.0) == 0 for c in classes):
        raise invalid(loc, "every class weighs 0; some class must weigh more")


def check_weight_column(session: Session, dataset: Dataset, request: TrainRequest,
                        on_cluster: bool) -> None:
    """422 at ``weight_column`` unless it names a numeric column of the dataset whose values
    can weigh this fit's rows (the first bad row named by its 0-based index among the
    dataset's stored rows). Reads the dataset's rows once."""
    name = request.weight_column
    if name is None:
        return
    _check_weighted_fit(dataset, request, on_cluster)
    if column_position(dataset.encoding, name) is None:
        names = list(dataset.feature_names)
        why = ("is categorical (one-hot encoded); a weight column must be numeric"
               if any(n.startswith(f"{name}=") for n in names) else
               "is the label" if name == dataset.encoding.get("label") else
               f"is not a column of the dataset; its numeric columns include {preview(names)}")
        raise invalid(_COLUMN, f"{name!r} {why}", column=name)
    X, y = datasets.load_arrays(session, dataset)
    _, w, _ = without_column(X, dataset.encoding, name)
    del X
    _check_values(name, w)
    train_idx, _ = split_indices(y, request.test_fraction, request.seed)
    try:
        fit_weights(request.class_weight, w[train_idx], y[train_idx])
    except ValueError as exc:
        raise invalid(_COLUMN, f"column {name!r} on the training part: "
                      f"{str(exc).split(': ', 1)[-1]}", column=name) from None


def _check_weighted_fit(dataset: Dataset, request: TrainRequest, on_cluster: bool) -> None:
    """422 at ``weight_column`` for a fit that cannot take rows' weights."""
    if "class_weight" not in param_names(request.algorithm):
        raise invalid(_COLUMN, f"{request.algorithm} has no weighted form; weight_column is "
                               f"taken by {WEIGHTED}")
    search = request.search
    others = [a for a in (search.algorithms or ()) if a != "msvmav"] if search else []
    if others:
        raise invalid(_COLUMN, f"the auto search's comparators {others} race without "
                               "weights; race msvmav only (search.algorithms) or give "
                               "hyper-parameters")
    if dataset.encoding.get("format") == "svmlight":
        raise invalid(_COLUMN, "an svmlight dataset's columns are positions: a weight column "
                               "would shift every later one; upload the weights as a column of "
                               "a CSV, ARFF or Parquet file")
    if on_cluster or dataset.reference is not None:
        raise invalid(_COLUMN, "the Dask cluster's fit and a dataset by reference take no "
                               "weight column")


def _check_values(name: str, w: np.ndarray) -> None:
    """422 naming the column and the first row whose weight is missing, not finite or
    negative, or when every row weighs 0."""
    for bad, what in ((np.isnan(w), "is missing"), (np.isinf(w), "is not finite"),
                      (w < 0, "is negative")):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise invalid(_COLUMN, f"column {name!r}: the weight of row {row} (0-based) {what} "
                          f"({float(w[row])}); {int(bad.sum())} rows in all; weights must be "
                          "finite and >= 0", column=name, row=row)
    if not np.any(w > 0):
        raise invalid(_COLUMN, f"column {name!r}: every row weighs 0; some must weigh more",
                      column=name)
