"""Model data functions: save a training outcome, read, list, delete, load the estimator.

Loaded models are cached per engine (``ModelCache``), keyed by model id and bounded by memory.
Models are immutable once written and their ids are never reused (AUTOINCREMENT on SQLite, a
sequence on PostgreSQL), so a cached entry cannot go stale; deletion is what matters.
``load_cached`` therefore still asks the database, on every call, whether the row exists (one
primary-key lookup of two small columns, no JSON, no blobs): a model deleted by any API process
is not found at once, even where another process still holds it in its cache. The process that
deletes a model also drops it from its own cache.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy import delete as sql_delete
from sqlalchemy.orm import Session
from sqlalchemy.pool import Pool

from app.core import storage
from app.core.db import begin_read, fetch_one
from app.core.jsonable import jsonable
from app.core.orm import Dataset, Model, ModelArray, ModelVersion, RegisteredModel
from app.core.pagination import PageParams, paginate
from app.core.problems import conflict, invalid, not_found
from app.training.pipeline import TrainOutcome
from solver.scaling import MinMaxScaling

ESTIMATOR_PREFIX = "est."
SCALING_PREFIX = "scaling."
# Memory one API process spends on loaded models (per database); least recently used go first.
MODEL_CACHE_BYTES = 256 * 1024 * 1024


@dataclass
class LoadedModel:
    """A model ready to predict: raw rows -> encoding -> scaling -> estimator.

    Shared between requests once cached: treat every field as read-only."""

    id: int
    n_features: int
    encoding: dict[str, Any]
    estimator: Any
    scaling: MinMaxScaling | None
    # Identity of the stored row beyond its id (a database rebuilt under the same URL): its
    # model_stamp, set by load_cached.
    stamp: tuple[Any, ...] | None = None
    nbytes: int = 0
    # Per-model helpers built on first use by other modules (e.g. the row encoder).
    extras: dict[str, Any] = field(default_factory=dict)

    def transform(self, X: Any, *, copy: bool = True) -> Any:
        """X scaled like the training data (``copy=False``: a dense float64 X in place)."""
        return self.scaling.transform(X, copy=copy) if self.scaling is not None else X


class ModelCache:
    """Thread-safe LRU of LoadedModel by id, bounded by the bytes of their arrays and JSON."""

    def __init__(self, max_bytes: int = MODEL_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._items: OrderedDict[int, LoadedModel] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, model_id: int) -> LoadedModel | None:
        with self._lock:
            hit = self._items.get(model_id)
            if hit is not None:
                self._items.move_to_end(model_id)
            return hit

    def put(self, loaded: LoadedModel) -> None:
        if loaded.nbytes > self.max_bytes:
            return  # larger than the whole budget: served, not kept
        with self._lock:
            old = self._items.pop(loaded.id, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._items[loaded.id] = loaded
            self.nbytes += loaded.nbytes
            while self.nbytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self.nbytes -= evicted.nbytes

    def drop(self, model_id: int) -> None:
        with self._lock:
            old = self._items.pop(model_id, None)
            if old is not None:
                self.nbytes -= old.nbytes


# The per-request existence check, on the driver's own connection (see model_stamp).
_STAMP_SQL = "SELECT job_id, created_at FROM models WHERE id = ?"
# One cache per connection pool: an engine and its execution_options() copies (the read-only
# sessions' engine, app.core.db.read_only) share their pool, and so their cache.
_caches: weakref.WeakKeyDictionary[Pool, ModelCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def model_cache(session: Session) -> ModelCache:
    """The cache of the database ``session`` is bound to."""
    bind = session.get_bind()
    return engine_cache(getattr(bind, "engine", bind))  # a Connection bind: its Engine


def engine_cache(engine: Engine) -> ModelCache:
    """The model cache of ``engine``'s database in this process."""
    with _caches_lock:
        cache = _caches.get(engine.pool)
        if cache is None:
            cache = _caches[engine.pool] = ModelCache()
        return cache


def model_cache_holds(engine: Engine, model_id: int) -> bool:
    """Does this process's cache hold the model (whether still current or not)? No I/O."""
    return engine_cache(engine).get(model_id) is not None


def get(session: Session, model_id: int) -> Model | None:
    return session.get(Model, model_id)


def get_or_raise(session: Session, model_id: int, loc: list[str | int] | None = None) -> Model:
    """The model; 404, or 422 naming ``loc`` when the id came in the body or query."""
    model = get(session, model_id)
    if model is None:
        raise not_found("model", model_id, loc)
    return model


def list_page(
    session: Session,
    page: PageParams,
    *,
    dataset_id: int | None = None,
    algorithm: str | None = None,
    registered_model: str | None = None,
) -> tuple[list[Model], str | None]:
    """A page of models, only those of ``dataset_id``, of ``algorithm`` and that are versions
    of ``registered_model`` (422 when there is no registered model of that name)."""
    stmt = select(Model)
    if dataset_id is not None:
        stmt = stmt.where(Model.dataset_id == dataset_id)
    if algorithm is not None:
        stmt = stmt.where(Model.algorithm == algorithm)
    if registered_model is not None:
        owner = session.scalar(
            select(RegisteredModel.id).where(RegisteredModel.name == registered_model)
        )
        if owner is None:
            raise invalid(
                ["query", "registered_model"], f"registered model {registered_model!r} not found"
            )
        versions = select(ModelVersion.model_id).where(ModelVersion.registered_model_id == owner)
        stmt = stmt.where(Model.id.in_(versions))
    return paginate(session, stmt, Model.id, page)


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


def model_stamp(engine: Engine, model_id: int) -> tuple[Any, ...] | None:
    """(job_id, created_at) of the model's row as the driver returns them, or None if there is
    no such row: one primary-key read (``fetch_one``), no ORM session."""
    return fetch_one(engine, _STAMP_SQL, (model_id,))


def load_cached(
    session: Session,
    model_id: int,
    loc: list[str | int] | None = None,
    stamp: tuple[Any, ...] | None = None,
) -> LoadedModel:
    """The model ready to predict, from this process's cache when it holds it; 404 (or 422
    naming ``loc``) when the model does not exist (any more) in the database.

    Every call checks the row (``model_stamp``, on a pooled connection: a warm call uses no
    ORM session) unless the caller read its ``stamp`` just now (a registry reference resolves
    to the model and its stamp in one read); a cache miss then reads the model in
    ``session``, in a read-only transaction when the session has none yet. Nothing is
    written."""
    bind = session.get_bind()
    engine = getattr(bind, "engine", bind)
    if stamp is None:
        stamp = model_stamp(engine, model_id)
    cache = engine_cache(engine)
    if stamp is None:
        cache.drop(model_id)
        raise not_found("model", model_id, loc)
    hit = cache.get(model_id)
    if hit is not None and hit.stamp == stamp:
        return hit
    begin_read(session)
    loaded = load(session, get_or_raise(session, model_id, loc))
    loaded.stamp = stamp
    cache.put(loaded)
    return loaded


def load(session: Session, model: Model) -> LoadedModel:
    """Read the model's arrays and rebuild its estimator (no cache; see ``load_cached``)."""
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
    nbytes = sum(a.nbytes for a in arrays.values()) + len(
        json.dumps([model.encoding, model.estimator_meta], default=str)
    )
    return LoadedModel(
        id=model.id,
        n_features=model.n_features,
        encoding=model.encoding,
        estimator=estimator,
        scaling=scaling,
        nbytes=nbytes,
    )


def delete(session: Session, model_id: int) -> None:
    """Delete the model; 409 while it is a version of a registered model. The row is locked
    first, so a version being added at the same time either is seen here or fails."""
    model = session.scalars(select(Model).where(Model.id == model_id).with_for_update()).first()
    if model is None:
        raise not_found("model", model_id)
    versions = session.execute(
        select(RegisteredModel.name, ModelVersion.version)
        .join(RegisteredModel, RegisteredModel.id == ModelVersion.registered_model_id)
        .where(ModelVersion.model_id == model_id)
        .order_by(RegisteredModel.name, ModelVersion.version)
    ).all()
    if versions:
        named = ", ".join(f"version {v} of registered model {n!r}" for n, v in versions)
        raise conflict(
            f"model {model_id} is {named}; remove the version first "
            "(DELETE /registered-models/{name}/versions/{version})"
        )
    session.execute(sql_delete(ModelArray).where(ModelArray.model_id == model.id))
    session.delete(model)
    session.commit()
    model_cache(session).drop(model_id)
