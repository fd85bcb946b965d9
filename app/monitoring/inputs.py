"""The logged inputs: the encoded row (before scaling) of each prediction made through a
registered model, kept beside the prediction log so that a retraining job (app.loop) can fit
on the rows that were fed back (``feedback_rows``: their inputs and true classes, one row per
prediction id).

The request path only appends its rows to a bounded queue (``InputWriter``, a ``BatchQueue``);
a daemon thread writes them every ``FLUSH_SECONDS``, ``BATCH_ROWS`` per transaction, and once
every ``RETENTION_SECONDS`` deletes the rows older than the prediction log's days
(``MSVMAV_PREDICTION_LOG_DAYS``). A request of more than ``MAX_REQUEST_ROWS`` rows (a file)
keeps no inputs (its rows are counted in ``skipped``): the loop learns from the live rows
that get feedback, not from bulk scoring. ``MSVMAV_LOG_INPUTS=false`` keeps none.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy import and_, delete, insert, select
from sqlalchemy.orm import Session

from app.core.runtime import Part, Runtime
from app.models import service as models
from app.monitoring.background import BatchQueue
from app.monitoring.orm import PredictionInput, PredictionLog

log = logging.getLogger("app.monitoring.inputs")

QUEUE_ROWS = 100_000
BATCH_ROWS = 5_000
FLUSH_SECONDS = 0.25
RETENTION_SECONDS = 300.0
MAX_REQUEST_ROWS = 1_000
# The most fed-back rows one retraining job reads (the newest ones).
MAX_FEEDBACK_ROWS = 1_000_000

# (model id, registered model, time, ids, encoded rows (n, d))
Entry = tuple[int, str, datetime, list[Any], Any]


class InputWriter(BatchQueue[Entry]):
    """The queue and the thread writing it for one database (see the module's docstring)."""

    label = "prediction inputs"

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self.engine = runtime.engine
        self.days = runtime.settings.prediction_log_days
        self.skipped = 0
        self.written = 0
        self._retained_at = 0.0

    def record(self, model_id: int, name: str, ids: list[Any], X: Any) -> bool:
        if len(ids) > MAX_REQUEST_ROWS:
            self.skipped += len(ids)
            return False
        return self._put((model_id, name, datetime.now(UTC), ids, X))

    def _rows_of(self, entry: Entry) -> int:
        return len(entry[3])

    def _limits(self) -> tuple[int, int, float]:
        return QUEUE_ROWS, BATCH_ROWS, FLUSH_SECONDS

    def flush(self) -> None:
        """Write every queued row now (and the retention, when due)."""
        with self._write_lock:
            while True:
                batch = self._take()
                if not batch:
                    break
                try:
                    self._write(batch)
                except Exception:
                    self.dropped += sum(len(e[3]) for e in batch)
                    raise
                finally:
                    self._finished(sum(len(e[3]) for e in batch))
            if time.monotonic() - self._retained_at >= RETENTION_SECONDS:
                self._retained_at = time.monotonic()
                cutoff = datetime.now(UTC) - timedelta(days=self.days)
                with self.engine.begin() as conn:
                    conn.execute(delete(PredictionInput).where(
                        PredictionInput.created_at < cutoff))

    def _write(self, batch: list[Entry]) -> None:
        rows = []
        for model_id, name, at, ids, X in batch:
            dense = X.toarray() if sp.issparse(X) else np.asarray(X)
            data = np.ascontiguousarray(dense, dtype="<f8")
            rows += [{"model_id": model_id, "registered_model": name, "prediction_id": str(i),
                      "created_at": at, "row": data[k].tobytes()} for k, i in enumerate(ids)]
        with self.engine.begin() as conn:
            conn.execute(insert(PredictionInput), rows)
        self.written += len(rows)


def _made(runtime: Runtime) -> InputWriter | None:
    settings = runtime.settings
    return InputWriter(runtime) if settings.prediction_log and settings.log_inputs else None


#: The runtime's input writer (None when inputs are not kept).
INPUT_LOG: Part[InputWriter | None] = Part("prediction inputs writer", _made, InputWriter.close)


def writer(runtime: Runtime) -> InputWriter | None:
    return runtime.get(INPUT_LOG)


@dataclass(frozen=True)
class FeedbackRows:
    """Fed-back logged rows of a registered model: X (m, d) encoded inputs, ``labels`` (m,)
    the true classes as the models' ``classes`` spell them, ``ids`` their prediction ids;
    ``other_width``: rows skipped for another number of features than asked."""

    X: np.ndarray
    labels: np.ndarray
    ids: list[str]
    other_width: int


def feedback_rows(session: Session, name: str, n_features: int, since: datetime | None,
                  until: datetime | None) -> FeedbackRows:
    """The logged inputs of registered model ``name`` with feedback, logged in [since, until)
    (None: unbounded), one row per prediction id (its newest), the newest MAX_FEEDBACK_ROWS."""
    pi, pl = PredictionInput, PredictionLog
    stmt = (select(pi.id, pi.model_id, pi.prediction_id, pi.row, pl.true_class)
            .join(pl, and_(pl.model_id == pi.model_id, pl.prediction_id == pi.prediction_id))
            .where(pi.registered_model == name, pl.true_class.is_not(None)))
    if since is not None:
        stmt = stmt.where(pi.created_at >= since)
    if until is not None:
        stmt = stmt.where(pi.created_at < until)
    newest: dict[str, tuple[int, bytes, int]] = {}
    for _, model_id, pid, row, true_class in session.execute(
            stmt.order_by(pi.id.desc()).limit(MAX_FEEDBACK_ROWS)):
        newest.setdefault(pid, (model_id, row, true_class))  # (newest first: the first wins)
    classes: dict[int, list[Any]] = {}
    X, labels, ids, other = [], [], [], 0
    for pid, (model_id, row, true_class) in reversed(list(newest.items())):
        values = np.frombuffer(row, dtype="<f8")
        if values.size != n_features:
            other += 1
            continue
        if model_id not in classes:
            found = models.get(session, model_id)
            classes[model_id] = list(found.classes) if found is not None else []
        if true_class >= len(classes[model_id]):
            other += 1
            continue
        X.append(values)
        labels.append(classes[model_id][true_class])
        ids.append(pid)
    matrix = np.vstack(X) if X else np.empty((0, n_features))
    return FeedbackRows(matrix, np.asarray(labels, dtype=object), ids, other)


def labelled_count(session: Session, name: str, since: datetime | None) -> int:
    """How many prediction ids of ``name`` logged since ``since`` have feedback and an input
    kept (a policy's "N new labelled rows")."""
    from sqlalchemy import func

    pi, pl = PredictionInput, PredictionLog
    stmt = (select(func.count(func.distinct(pi.prediction_id)))
            .join(pl, and_(pl.model_id == pi.model_id, pl.prediction_id == pi.prediction_id))
            .where(pi.registered_model == name, pl.true_class.is_not(None)))
    if since is not None:
        stmt = stmt.where(pi.created_at >= since)
    return int(session.scalar(stmt) or 0)
