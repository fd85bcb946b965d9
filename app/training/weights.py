"""/train's ``class_weight`` checked against the dataset before a job is queued (422 naming
the field): the algorithm must have a weighted form, a mapping's classes must be the
dataset's, and some class must weigh more than 0. The weights themselves are the solver's
(``solver.weights``: scikit-learn's semantics); a weight that is negative or not finite is
refused by the request's schema."""

from __future__ import annotations

from app.core.problems import invalid
from app.datasets.orm import Dataset
from app.training.schemas import TrainRequest
from solver.algorithms import param_names

WEIGHTED = "msvmav, svm and svr"


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
