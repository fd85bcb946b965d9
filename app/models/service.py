"""Model data functions: save a training outcome, read, list, delete, load the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import delete as sql_delete
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import storage
from app.jsonable import jsonable
from app.orm import Dataset, Model, ModelArray
from app.pagination import PageParams, paginate
from app.problems import not_found
from app.training import TrainOutcome
from solver.scaling import MinMaxScaling

ESTIMATOR_PREFIX = "est."
SCALING_PREFIX = "scaling."


@dataclass
class LoadedModel:
    """A model ready to predict: raw rows -> encoding -> scaling -> estimator."""

    row: Model
    estimator: Any
    scaling: MinMaxScaling | None

    def transform(self, X: Any) -> Any:
        return self.scaling.transform(X) if self.scaling is not None else X


def get(session: Session, model_id: int) -> Model | None:
    return session.get(Model, model_id)


def get_or_raise(session: Session, model_id: int, loc: list[str | int] | None = None) -> Model:
    """The model; 404, or 422 naming ``loc`` when the id came in the body or query."""
    model = get(session, model_id)
    if model is None:
        raise not_found("model", model_id, loc)
    return model


def list_page(session: Session, page: PageParams) -> tuple[list[Model], str | None]:
    return paginate(session, select(Model), Model.id, page)


def save(
    session: Session, *, outcome: TrainOutcome, dataset: Dataset, job_id: int, params: dict
) -> Model:
    """Add (not commit) the model row and its blobs: the caller commits them together with the
    job's ``succeeded``."""
    d = outcome.estimator.to_dict()
    model = Model(
        job_id=job_id,
        dataset_id=dataset.id,
        algorithm=outcome.algorithm,
        params={
            **outcome.params,
            "test_fraction": params.get("test_fraction"),
            "seed": params.get("seed"),
        },
        scaling=params.get("scaling", "minmax"),
        classes=outcome.classes,
        n_features=dataset.n_features,
        feature_names=list(dataset.feature_names),
        encoding=dataset.encoding,
        estimator_meta=jsonable(d["meta"]),
        summary=outcome.summary,
        n_train=outcome.n_train,
        n_test=outcome.n_test,
        holdout_accuracy=outcome.holdout_accuracy,
        fit_seconds=outcome.fit_seconds,
        n_iter=outcome.n_iter,
    )
    session.add(model)
    session.flush()
    blobs = {
        ESTIMATOR_PREFIX + k: storage.array_to_bytes(np.asarray(v)) for k, v in d["arrays"].items()
    }
    if outcome.scaling is not None:
        blobs |= {
            SCALING_PREFIX + k: storage.array_to_bytes(v)
            for k, v in outcome.scaling.to_arrays().items()
        }
    session.add_all(ModelArray(model_id=model.id, name=k, data=v) for k, v in blobs.items())
    return model


def load(session: Session, model: Model) -> LoadedModel:
    from solver import model_from_dict

    rows = session.execute(
        select(ModelArray.name, ModelArray.data).where(ModelArray.model_id == model.id)
    ).all()
    arrays = {name: storage.bytes_to_array(bytes(data)) for name, data in rows}
    est_arrays = {
        k[len(ESTIMATOR_PREFIX) :]: v for k, v in arrays.items() if k.startswith(ESTIMATOR_PREFIX)
    }
    scaling_arrays = {
        k[len(SCALING_PREFIX) :]: v for k, v in arrays.items() if k.startswith(SCALING_PREFIX)
    }
    estimator = model_from_dict({"meta": model.estimator_meta, "arrays": est_arrays})
    scaling = MinMaxScaling.from_arrays(scaling_arrays) if scaling_arrays else None
    return LoadedModel(row=model, estimator=estimator, scaling=scaling)


def delete(session: Session, model_id: int) -> None:
    model = get_or_raise(session, model_id)
    session.execute(sql_delete(ModelArray).where(ModelArray.model_id == model.id))
    session.delete(model)
    session.commit()
