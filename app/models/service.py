"""Model data functions: save a training outcome, read, list, delete; the cache of served
models; the margin statistics of a model (stored, or on a dataset) and their plots.

Served models (app.serving.model.ServedModel, made by app.serving.acquire) are cached per
database (``ModelCache``, a part of the process's ``app.core.runtime.Runtime``:
``MODEL_CACHE``), keyed by model id and bounded by memory. Models are immutable once written
and their ids are never reused (AUTOINCREMENT on SQLite, a sequence on PostgreSQL), so a cached
entry cannot go stale; deletion is what matters. ``app.serving.acquire`` therefore still asks
the database, on every call, whether the row exists (``model_stamp``: one primary-key lookup of
two small columns, no JSON, no blobs): a model deleted by any API process is not found at once,
even where another process still holds it in its cache. The process that deletes a model also
drops it from its own cache. The serving path may skip that read while the last one is younger
than app.core.recheck's window (the cache keeps when each entry was last checked:
``checked_at``; 1 s by default).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
from sqlalchemy import delete as sql_delete
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import storage
from app.core.jsonable import jsonable
from app.core.pagination import PageParams, paginate
from app.core.plotting import render_margin_cdf
from app.core.problems import conflict, invalid, not_found, unknown
from app.core.runtime import Part, Runtime, session_runtime
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from app.ingest.imputation import apply_fills
from app.models.decisions import oof_arrays
from app.models.features import dataset_features, feature_match
from app.models.loading import ESTIMATOR_PREFIX, SCALING_PREFIX, rebuild
from app.models.orm import Model, ModelArray
from app.models.schemas import MarginsOut, TrainOutcome
from app.registry.orm import ModelVersion, RegisteredModel
from solver import display_name

# Memory one API process spends on loaded models (per database); least recently used go first.
MODEL_CACHE_BYTES = 256 * 1024 * 1024


class ModelCache:
    """Thread-safe LRU of served models by id (anything with ``id``, ``stamp`` and ``nbytes``:
    app.serving.model.ServedModel), bounded by the bytes of their arrays and JSON; beside each
    entry, when its stamp was last read and found equal (``checked_at``: app.core.recheck.now()
    before the read), how fresh its "still exists" check is (see app.core.recheck)."""

    def __init__(self, max_bytes: int = MODEL_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._items: OrderedDict[int, Any] = OrderedDict()
        self._checked: dict[int, float] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, model_id: int) -> Any | None:
        with self._lock:
            hit = self._items.get(model_id)
            if hit is not None:
                self._items.move_to_end(model_id)
            return hit

    def current(self, model_id: int, stamp: tuple[Any, ...] | None) -> Any | None:
        """The cached model when it is still the stored one: the one rule of whether a cached
        entry may answer (its stamp equals the row's, read just now)."""
        hit = self.get(model_id) if stamp is not None else None
        return hit if hit is not None and hit.stamp == stamp else None

    def put(self, loaded: Any, checked_at: float | None = None) -> None:
        if loaded.nbytes > self.max_bytes:
            return  # larger than the whole budget: served, not kept
        with self._lock:
            old = self._items.pop(loaded.id, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._items[loaded.id] = loaded
            self._set_checked(loaded.id, checked_at)
            self.nbytes += loaded.nbytes
            while self.nbytes > self.max_bytes:
                evicted_id, evicted = self._items.popitem(last=False)
                self._checked.pop(evicted_id, None)
                self.nbytes -= evicted.nbytes

    def _set_checked(self, model_id: int, checked_at: float | None) -> None:
        if checked_at is None:
            self._checked.pop(model_id, None)
        else:
            self._checked[model_id] = checked_at

    def checked(self, model_id: int, checked_at: float) -> None:
        """The entry's stamp was read at ``checked_at`` and found equal."""
        with self._lock:
            if model_id in self._items:
                self._checked[model_id] = checked_at

    def checked_at(self, model_id: int) -> float | None:
        """When the entry's stamp was last found equal (None: never, or no entry). No I/O."""
        return self._checked.get(model_id)

    def drop(self, model_id: int) -> None:
        with self._lock:
            old = self._items.pop(model_id, None)
            self._checked.pop(model_id, None)
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


def holdout_rows(model: Model) -> list[int] | None:
    """The stored model's hold-out row indices of its dataset (None: it kept no hold-out, or
    predates them)."""
    holdout = (model.summary or {}).get("holdout") or {}
    return holdout.get("rows")


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


def load_estimator(session: Session, model: Model) -> tuple[Any, Any]:
    """The stored model's estimator and scaling (None: none), rebuilt uncached: a retrain's
    parent (app.loop), not a door's."""
    rebuilt = rebuild(session, model)
    return rebuilt.estimator, rebuilt.scaling


def model_stamp(runtime: Runtime, model_id: int) -> tuple[Any, ...] | None:
    """(job_id, created_at, its decision rule) of the model's row as the driver returns them,
    or None if there is no such row: one primary-key read (``fetch_one``), no ORM session."""
    return runtime.fetch_one(_STAMP_SQL, (model_id,))


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
    rebuilt = rebuild(session, model)  # (uncached: a report, not a door)
    session.commit()  # read-only: end the transaction before computing
    classes = rebuilt.estimator.classes_
    y_true = classes[match_labels(classes, y.tolist(), ["query", "dataset_id"])]
    X = apply_fills(X, model.encoding) if _imputes(model.encoding) else X
    if rebuilt.scaling is not None:
        X = rebuilt.scaling.transform(X)
    stats = jsonable(rebuilt.estimator.margins(X, y_true))
    return MarginsOut(
        model_id=model.id, source="dataset", dataset_id=dataset.id, n=len(y), statistics=stats
    )


def _imputes(encoding: dict[str, Any]) -> bool:
    return any("impute" in c for c in encoding.get("columns") or ())


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
