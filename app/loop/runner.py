"""The worker's runner for ``retrain`` jobs (``RETRAIN``, registered in ``app.jobs.registry``):
the parent's training rows plus the fed-back logged rows (app.monitoring.inputs), fitted
warm-started from the parent (app.training.warm: the library's ``MSVMAv.update_fit`` for
linear and kernel parents) and, to measure the saving, cold on the same rows; the warm fit
becomes the registered model's next version, with its lineage.

The update's rows: the parent's training rows are the first ``n_train + n_test`` rows (its
dataset, then a retrained parent's own fed-back rows) without its recorded hold-out rows; the
retrain's seeded split of all the rows (``split: "fresh"``) removes those of them it holds out
and adds the rest; ``split: "parent"`` keeps the parent's split of its rows and only adds
(``_parent_rows``)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from app.core.jsonable import jsonable
from app.datasets import service as datasets
from app.jobs.kinds import JobKind
from app.jobs.runtime import JobContext, JobResult, describe_iteration
from app.loop.schemas import RetrainJob
from app.models import service as models
from app.models.schemas import TrainOutcome
from app.monitoring import inputs
from app.registry import service as registry
from app.training import service as training
from solver import holdout_sizes, split_indices

Split = tuple[np.ndarray, np.ndarray]


def _kept_split(parent: np.ndarray, test: np.ndarray, rows: int, y: np.ndarray,
                job: RetrainJob) -> Split:
    """``split: "parent"``: the parent's training and hold-out rows as they were, the rows
    after its ``rows`` split by the seeded test_fraction (all training when too few)."""
    tail = y[rows:]
    fraction = job.train.get("test_fraction")
    new_train, new_test = np.arange(tail.size), np.arange(0)
    if fraction and tail.size and min(holdout_sizes(tail.size, fraction)) >= 1:
        new_train, new_test = split_indices(tail, fraction, job.train.get("seed"))
    return np.concatenate([parent, rows + new_train]), np.concatenate([test, rows + new_test])


def _parent_rows(shape: tuple[int, int, list[int]], X: Any, y: np.ndarray, job: RetrainJob
                 ) -> tuple[Split, dict[str, Any] | None]:
    """The update's rows (``Start``'s ``fitted``, ``remove``, ``order``): the parent's
    training rows (the first ``n_train + n_test`` rows without its hold-out rows, ``shape``
    n_train, n_test and the hold-out rows), which of them the retrain's hold-out takes
    (``remove``), and the training part's order that starts with the others in the parent's
    order; with the split (``job.split``: fresh, or the parent's kept). No update (None, and
    a fresh split) where the parent's rows are not the first ones (the dataset left out) or
    its hold-out rows are not recorded."""
    fresh = split_indices(y, job.train.get("test_fraction"), job.train.get("seed"))
    n_train, n_test, held = shape
    rows = n_train + n_test
    test = np.asarray(sorted(held), dtype=np.intp)
    if (not job.include_dataset or rows > len(y) or test.size != n_test
            or (test.size and (test[0] < 0 or test[-1] >= rows))):
        return fresh, None
    parent = np.setdiff1d(np.arange(rows), test, assume_unique=True)
    split = _kept_split(parent, test, rows, y, job) if job.split == "parent" else fresh
    train = split[0]
    kept = np.isin(parent, train)
    first = np.searchsorted(train, parent[kept])  # the kept rows' places in the training part
    rest = np.setdiff1d(np.arange(train.size), first, assume_unique=True)
    return split, {"fitted": (X[parent], y[parent]), "remove": np.flatnonzero(~kept),
                   "order": np.concatenate([first, rest])}


def _rows(ctx: JobContext, job: RetrainJob
          ) -> tuple[Any, np.ndarray, dict[str, Any], Any, Split | None]:
    """(X, y, what they are, the parent's start, the split): the dataset's rows (when
    included) and the fed-back rows after them."""
    with ctx.sessions() as session:
        parent = models.get(session, job.parent_model_id)
        dataset = datasets.get(session, ctx.dataset_id) if ctx.dataset_id is not None else None
        if parent is None or dataset is None:
            raise ValueError(f"the parent model {job.parent_model_id} or its dataset "
                             f"{ctx.dataset_id} no longer exists")
        estimator, scaling = models.load_estimator(session, parent)
        fed = inputs.feedback_rows(session, job.name, parent.n_features, job.since, job.until)
        X0, y0 = (datasets.load_arrays(session, dataset) if job.include_dataset
                  else (np.empty((0, parent.n_features)), np.empty(0, dtype=object)))
        held = ((parent.summary or {}).get("holdout") or {}).get("rows") or []
        shape = (int(parent.n_train), int(parent.n_test or 0), list(held))
    labels = fed.labels.tolist()
    if sp.issparse(X0):
        X = sp.vstack([X0, sp.csr_matrix(fed.X)], format="csr")
    else:
        X = np.vstack([np.asarray(X0, dtype=np.float64), fed.X])
    # the fed-back labels are the models' classes, spelt as the dataset's labels are
    y = np.asarray(y0.tolist() + labels)
    if len(y) == 0:
        raise ValueError("no rows to fit: the dataset is left out and no fed-back row was "
                         "logged in the window")
    added = {"dataset_id": dataset.id, "dataset_rows": int(len(y0)),
             "feedback_rows": int(len(labels)), "feedback_other_width": fed.other_width}
    split, update = _parent_rows(shape, X, y, job)
    return X, y, added, training.Start(estimator, scaling, update=update), split


def _callback(ctx: JobContext, label: str, lo: float, hi: float) -> Any:
    def callback(info: dict[str, Any]) -> None:
        if ctx.reporter.due():
            progress, detail = describe_iteration(info)
            ctx.reporter.report(lo + (hi - lo) * progress, f"{label}: {detail}")
    return callback


def _timed(fit: Any) -> tuple[TrainOutcome, float]:
    began = time.perf_counter()
    outcome = fit()
    return outcome, time.perf_counter() - began


def _figures(outcome: TrainOutcome, seconds: float) -> dict[str, Any]:
    return {"fit_seconds": outcome.fit_seconds, "seconds": seconds, "n_iter": outcome.n_iter,
            "holdout_accuracy": outcome.holdout_accuracy}


def _update_report(outcome: TrainOutcome, start: Any) -> dict[str, Any] | None:
    """The library's report of the warm fit's update (``fit_report().warm_start``: what it
    reused, its tolerance and iterations), or why none ran."""
    if not start.notes:
        return None
    if not start.notes.get("update"):
        return {"used": False, "reason": start.notes.get("reason")}
    return {"used": True, **jsonable(outcome.estimator.fit_report().warm_start or {})}


def run_retrain_job(ctx: JobContext, job: RetrainJob) -> JobResult:
    X, y, added, start, split = _rows(ctx, job)
    how = start.applies() if job.warm_start else "off"
    ctx.reporter.report(0.0, f"retraining {job.name} version {job.parent_version} on "
                             f"{added['dataset_rows']} dataset rows + {added['feedback_rows']} "
                             f"fed-back rows")
    cold = cold_seconds = None
    if job.compare_cold or not job.warm_start:
        X_cold = X.copy()
        twin = dataclasses.replace(start, cold=True, notes={}) if job.warm_start else None
        cold, cold_seconds = _timed(lambda: training.fit_rows(
            X_cold, y, job.train, start=twin, split=split,
            callback=_callback(ctx, "cold fit", 0.0, 0.5)))
    if job.warm_start:
        outcome, seconds = _timed(lambda: training.fit_rows(
            X, y, job.train, start=start, split=split,
            callback=_callback(ctx, "warm fit", 0.5, 1.0)))
    else:
        assert cold is not None and cold_seconds is not None
        outcome, seconds = cold, cold_seconds
    saving = {"applied": how, "split": job.split,
              "update": _update_report(outcome, start) if job.warm_start else None,
              "warm": _figures(outcome, seconds) if job.warm_start else None,
              "cold": _figures(cold, cold_seconds) if cold is not None else None}
    if job.warm_start and cold is not None:
        saving["speedup"] = cold.fit_seconds / max(outcome.fit_seconds, 1e-9)
        saving["iterations_saved"] = cold.n_iter - outcome.n_iter
    lineage = {"parent_version": job.parent_version, "parent_model_id": job.parent_model_id,
               **added, "window": {"since": job.since.isoformat() if job.since else None,
                                   "until": job.until.isoformat()},
               "search": job.train.get("search"), "warm_start": saving, "reason": job.reason,
               "job_id": ctx.job_id}
    return JobResult(write=_writer(ctx, job, outcome, lineage), message=_message(lineage))


def _writer(ctx: JobContext, job: RetrainJob, outcome: TrainOutcome,
            lineage: dict[str, Any]) -> Any:
    def write(session: Session) -> dict[str, Any]:
        parent = models.get_or_raise(session, job.parent_model_id)
        dataset = datasets.get(session, lineage["dataset_id"])
        if dataset is None:
            raise ValueError(f"dataset {lineage['dataset_id']} no longer exists")
        model = models.save(session, outcome=outcome, dataset=dataset, job_id=ctx.job_id,
                            params=job.train, chunk_bytes=ctx.settings.array_chunk_bytes)
        # the rows were encoded with the parent's encoding (fills, unknown categories)
        model.encoding, model.feature_names = parent.encoding, list(parent.feature_names)
        model.n_features = parent.n_features
        version = registry.add_version(session, job.name, model.id, lineage=lineage)
        registered = {"name": job.name, "version": version.version}
        return {"model_id": model.id, "result": {
            "model_id": model.id, "registered_as": registered,
            "holdout_accuracy": outcome.holdout_accuracy, "fit_seconds": outcome.fit_seconds,
            "n_iter": outcome.n_iter, "algorithm": outcome.algorithm, "lineage": lineage}}

    return write


def _message(lineage: dict[str, Any]) -> str:
    saving = lineage["warm_start"]
    warm, cold = saving.get("warm"), saving.get("cold")
    text = (f"retrained on {lineage['dataset_rows']} dataset rows + "
            f"{lineage['feedback_rows']} fed-back rows")
    update = saving.get("update") or {}
    if warm and cold:
        how = saving["applied"] + (", update_fit" if update.get("used") else "")
        text += (f"; warm start ({how}) {warm['fit_seconds']:.3f} s, "
                 f"{warm['n_iter']} iterations against a cold fit's {cold['fit_seconds']:.3f} s, "
                 f"{cold['n_iter']} iterations ({saving['speedup']:.2f}x)")
    fitted = warm or cold
    if fitted and fitted["holdout_accuracy"] is not None:
        text += f"; hold-out accuracy {fitted['holdout_accuracy']:.4f}"
    return text


RETRAIN = JobKind("retrain", RetrainJob, run_retrain_job)
