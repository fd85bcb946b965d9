"""Model data functions: save a training outcome, read, list, delete, load the estimator;
the margin statistics of a model (stored, or on a dataset) and their plots.

Loaded models are cached per database (``ModelCache``, a part of the process's
``app.core.runtime.Runtime``: ``MODEL_CACHE``), keyed by model id and bounded by memory.
Models are immutable once written and their ids are never reused (AUTOINCREMENT on SQLite, a
sequence on PostgreSQL), so a cached entry cannot go stale; deletion is what matters.
``load_cached`` therefore still asks the database, on every call, whether the row exists (one
primary-key lookup of two small columns, no JSON, no blobs): a model deleted by any API process
is not found at once, even where another process still holds it in its cache. The process that
deletes a model also drops it from its own cache. The predict path may skip that read while the
last one is younger than app.core.recheck's window (``held_fresh``; 1 s by default).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy import delete as sql_delete
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import recheck, storage
from app.core.db import begin_read
from app.core.jsonable import jsonable
from app.core.pagination import PageParams, paginate
from app.core.plotting import render_margin_cdf
from app.core.problems import conflict, invalid, not_found, unknown
from app.core.runtime import Part, Runtime, runtime_of, session_runtime
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.ingest.imputation import apply_fills
from app.models.decisions import OOF_PREFIX, model_rule_text, oof_arrays, stored_rule
from app.models.features import dataset_features, feature_match
from app.models.orm import Model, ModelArray
from app.models.schemas import MarginsOut, TrainOutcome
from app.registry.orm import ModelVersion, RegisteredModel
from solver import MinMaxScaling, display_name

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
    # When that stamp was last read and found equal (app.core.recheck.now() before the read):
    # how fresh the "still exists" check is (see app.core.recheck).
    checked_at: float | None = None
    nbytes: int = 0
    # The stored model's decision rule (solver.decision; None: the default), read with it
    rule: dict[str, Any] | None = None
    # Per-model helpers built on first use by other modules (e.g. the row encoder).
    extras: dict[str, Any] = field(default_factory=dict)

    def impute(self, X: Any, *, copy: bool = True) -> Any:
        """An encoded X (a stored dataset's rows) with its missing cells (NaN) filled as the
        model's imputation says (``copy=False``: a dense X in place); X itself when the model
        imputes nothing."""
        if not any("impute" in c for c in self.encoding.get("columns") or ()):
            return X
        if not sp.issparse(X) and copy:
            X = np.array(X, dtype=np.float64)
        return apply_fills(X, self.encoding)

    def transform(self, X: Any, *, copy: bool = True) -> Any:
        """X (imputed, ``impute``) scaled like the training data (``copy=False``: a dense
        float64 X in place)."""
        X = self.impute(X, copy=copy)
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

    def current(self, model_id: int, stamp: tuple[Any, ...] | None) -> LoadedModel | None:
        """The cached model when it is still the stored one: the one rule of whether a cached
        entry may answer (its stamp equals the row's, read just now)."""
        hit = self.get(model_id) if stamp is not None else None
        return hit if hit is not None and hit.stamp == stamp else None

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
_STAMP_SQL = ("SELECT m.job_id, m.created_at, r.rule FROM models m "
              "LEFT JOIN model_rules r ON r.model_id = m.id WHERE m.id = ?")
MODEL_CACHE: Part[ModelCache] = Part("model cache", lambda _runtime: ModelCache())


def model_cache(session: Session) -> ModelCache | None:
    """The model cache of the runtime whose factories made ``session``; None for a session
    no runtime made (it has no cache)."""
    runtime = session_runtime(session)
    return None if runtime is None else runtime.get(MODEL_CACHE)


def model_cache_holds(runtime: Runtime, model_id: int) -> bool:
    """Does this process's cache hold the model (whether still current or not)? No I/O."""
    return runtime.get(MODEL_CACHE).get(model_id) is not None


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
            raise unknown(
                ["query", "registered_model"], f"registered model {registered_model!r} not found"
            )
        versions = select(ModelVersion.model_id).where(ModelVersion.registered_model_id == owner)
        stmt = stmt.where(Model.id.in_(versions))
    return paginate(session, stmt, Model.id, page)


def save(
    session: Session,
    *,
    outcome: TrainOutcome,
    dataset: Dataset,
    job_id: int,
    params: dict,
    chunk_bytes: int = storage.DEFAULT_CHUNK_BYTES,
) -> Model:
    """Add (not commit) the model row and its arrays (in chunks of at most ``chunk_bytes``):
    the caller commits them together with the job's ``succeeded``."""
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
    arrays = {ESTIMATOR_PREFIX + k: np.asarray(v) for k, v in d["arrays"].items()}
    if outcome.scaling is not None:
        arrays |= {SCALING_PREFIX + k: v for k, v in outcome.scaling.to_arrays().items()}
    arrays |= oof_arrays(outcome.estimator)
    for name, a in arrays.items():
        storage.write_array(session, ModelArray, model.id, name, a, chunk_bytes)
    return model


def model_stamp(runtime: Runtime, model_id: int) -> tuple[Any, ...] | None:
    """(job_id, created_at, its decision rule) of the model's row as the driver returns them,
    or None if there is no such row: one primary-key read (``fetch_one``), no ORM session."""
    return runtime.fetch_one(_STAMP_SQL, (model_id,))


def load_cached(
    session: Session,
    model_id: int,
    loc: list[str | int] | None = None,
    stamp: tuple[Any, ...] | None = None,
    checked_at: float | None = None,
) -> LoadedModel:
    """The model ready to predict, from this process's cache when it holds it; 404 (or 422
    naming ``loc``) when the model does not exist (any more) in the database.

    Every call checks the row (``model_stamp``, on a pooled connection: a warm call uses no
    ORM session) unless the caller read its ``stamp`` just now (a registry reference resolves
    to the model and its stamp in one read; ``checked_at``: app.core.recheck.now() before
    that read, which makes the entry fresh for ``held_fresh``); a cache miss then reads the
    model in ``session``, in a read-only transaction when the session has none yet. Nothing
    is written."""
    runtime = runtime_of(session)
    if stamp is None:
        checked_at = recheck.now()
        stamp = model_stamp(runtime, model_id)
    cache = runtime.get(MODEL_CACHE)
    if stamp is None:
        cache.drop(model_id)
        raise not_found("model", model_id, loc)
    hit = cache.current(model_id, stamp)
    if hit is not None:
        if checked_at is not None:
            hit.checked_at = checked_at
        return hit
    begin_read(session)
    loaded = load(session, get_or_raise(session, model_id, loc))
    loaded.stamp = stamp
    loaded.checked_at = checked_at
    cache.put(loaded)
    return loaded


def held_fresh(runtime: Runtime, model_id: int, seconds: float) -> LoadedModel | None:
    """The cached model when its existence was checked less than ``seconds`` ago
    (app.core.recheck); None otherwise. No I/O."""
    hit = runtime.get(MODEL_CACHE).get(model_id)
    if hit is not None and recheck.fresh(hit.checked_at, seconds):
        return hit
    return None


def load(session: Session, model: Model) -> LoadedModel:
    """Read the model's arrays and rebuild its estimator (no cache; see ``load_cached``)."""
    from solver import model_from_dict

    arrays = storage.read_arrays(session, ModelArray, model.id, skip=OOF_PREFIX)
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
        rule=stored_rule(model_rule_text(session, model.id), estimator),
    )


def registered_versions(session: Session, model_id: int) -> list[tuple[str, int]]:
    """The (registered model, version) pairs that stored model ``model_id`` is, by name and
    version (a model that is a version cannot be deleted; the web interface links them)."""
    rows = session.execute(
        select(RegisteredModel.name, ModelVersion.version)
        .join(RegisteredModel, RegisteredModel.id == ModelVersion.registered_model_id)
        .where(ModelVersion.model_id == model_id)
        .order_by(RegisteredModel.name, ModelVersion.version)
    )
    return [(name, version) for name, version in rows]


def delete(session: Session, model_id: int) -> None:
    """Delete the model; 409 while it is a version of a registered model. The row is locked
    first, so a version being added at the same time either is seen here or fails."""
    model = session.scalars(select(Model).where(Model.id == model_id).with_for_update()).first()
    if model is None:
        raise not_found("model", model_id)
    versions = registered_versions(session, model_id)
    if versions:
        named = ", ".join(f"version {v} of registered model {n!r}" for n, v in versions)
        raise conflict(
            f"model {model_id} is {named}; remove the version first "
            "(DELETE /registered-models/{name}/versions/{version})"
        )
    session.execute(sql_delete(ModelArray).where(ModelArray.model_id == model.id))
    session.delete(model)
    session.commit()
    cache = model_cache(session)
    if cache is not None:
        cache.drop(model_id)


# -- margins -----------------------------------------------------------------------------------
def match_labels(classes: np.ndarray, labels: list[Any], loc: list[str | int]) -> np.ndarray:
    """Indices into ``classes`` of the given true labels (matched by value, then as text)."""
    lookup: dict[Any, int] = {}
    for i, c in enumerate(classes.tolist()):
        lookup.setdefault(c, i)
        lookup.setdefault(str(c), i)
    out = np.empty(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        key = label.item() if isinstance(label, np.generic) else label
        idx = lookup.get(key) if isinstance(key, str | int | float | bool) else None
        if idx is None:
            idx = lookup.get(str(key))
        if idx is None:
            raise invalid(
                [*loc, i],
                f"label {key!r} is not one of the model's classes {classes.tolist()}",
                row=i,
            )
        out[i] = idx
    return out


def model_margins(
    session: Session, *, model_id: int, dataset_id: int | None, split: str
) -> MarginsOut:
    """Stored training/hold-out statistics, or fresh ones on a whole stored dataset."""
    return _margins(session, get_or_raise(session, model_id), dataset_id, split)


def _margins(session: Session, model: Model, dataset_id: int | None, split: str) -> MarginsOut:
    if dataset_id is None:
        if split == "holdout":
            holdout = (model.summary or {}).get("holdout")
            if not holdout or not holdout.get("margins"):
                raise invalid(["query", "split"], f"model {model.id} was trained without hold-out")
            stats = holdout["margins"]
        else:
            stats = (model.summary or {}).get("train_margins") or {}
        return MarginsOut(
            model_id=model.id,
            source="training" if split == "train" else "holdout",
            dataset_id=model.dataset_id,
            n=int(stats.get("n", 0) or 0),
            statistics=stats,
        )
    dataset = datasets.get_or_raise(session, dataset_id, ["query", "dataset_id"])
    if not feature_match(dataset, model):
        raise invalid(
            ["query", "dataset_id"],
            f"dataset {dataset_id} has {dataset.n_features} features that differ from the "
            f"model's {model.n_features}",
        )
    X, y = datasets.load_arrays(session, dataset)
    X = dataset_features(X, dataset, model)  # without the model's weight column
    session.commit()  # read-only: end the transaction before loading and computing
    loaded = load_cached(session, model.id, None)
    if session.in_transaction():  # a cache miss read the model
        session.commit()
    classes = loaded.estimator.classes_
    y_true = classes[match_labels(classes, y.tolist(), ["query", "dataset_id"])]
    stats = jsonable(loaded.estimator.margins(loaded.transform(X), y_true))
    return MarginsOut(
        model_id=model.id, source="dataset", dataset_id=dataset.id, n=len(y), statistics=stats
    )


def model_margins_plot(
    session: Session, model_id: int, dataset_id: int | None, split: str, fmt: str
) -> bytes:
    """The model's margin CDF as PNG/SVG bytes (same rows as ``model_margins``)."""
    model = get_or_raise(session, model_id)
    out = _margins(session, model, dataset_id, split)
    cdf = out.statistics.get("cdf")
    if not cdf:
        raise invalid(["query", "split"], f"model {model_id} has no stored margins")
    session.commit()  # read-only: end the transaction before rendering
    where = {
        "training": "training part",
        "holdout": "hold-out part",
        "dataset": f"dataset {dataset_id}",
    }[out.source]
    return render_margin_cdf(
        {f"{display_name(model.algorithm)} (n={out.n})": cdf},
        title=f"model {model_id}: cumulative margin distribution ({where})",
        fmt=fmt,
    )
