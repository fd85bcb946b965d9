"""Per-feature drift: the logged rows' scaled features, counted in fixed bins, against the
training part's.

A model's features are min-max scaled to [0, 1] and clipped before scoring, so each feature's
live distribution is kept as counts over ``BINS`` equal-width bins of [0, 1] (bin
``min(floor(x * BINS), BINS - 1)``), per model and minute. The request only hands the log's
queue a reference to the scaled matrix it scored (``admit``: no copy, no counting); the log's
writer thread counts it as it takes the rows off the queue (``record``) and writes the counts
every ``WRITE_SECONDS`` (``write``; the report writes its own process's first) to
``feature_counts``, one row per model and minute holding an (n_features, BINS) uint32 array.
Only models with at most ``MAX_FEATURES`` features and min-max scaling are counted; at most
``QUEUE_CELLS`` feature values wait in the queue (beyond that a request's rows are logged
without their features and counted in ``dropped_rows``).

The reference is the same counts of the training part's scaled features. Per feature: the
two-sample Kolmogorov-Smirnov statistic of the binned distributions (the largest gap between
the two CDFs at the bin edges) and its p-value as ``scipy.stats.ks_2samp``'s asymptotic mode
computes it (``kstwo.sf(D, round(n·m/(n+m)))``); a feature drifted when its p-value is below
``DRIFT_P_VALUE`` divided by the number of features (Bonferroni: training-like traffic flags
some feature in at most about 1% of windows).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.stats import kstwo
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.monitoring import samples
from app.monitoring.orm import FeatureCounts

log = logging.getLogger("app.monitoring.feature_drift")

BINS = 20
MAX_FEATURES = 1_000
QUEUE_CELLS = 16_000_000  # feature values (float64: 128 MB) waiting in a log queue at most
WRITE_SECONDS = 60.0
RETENTION_SECONDS = 60.0
DRIFT_P_VALUE = 0.01
TOP_FEATURES = 10
_CHUNK_CELLS = 1_000_000  # values binned at a time (the bin index array's size)


def _cells(X: Any) -> int:
    return int(X.nnz) if sp.issparse(X) else int(X.size)


def bin_counts(X: Any, bins: int = BINS) -> np.ndarray:
    """(n_features, bins) int64 counts of X's values (scaled to [0, 1]) per feature in
    ``bins`` equal-width bins; a CSR X's implicit zeros count in bin 0."""
    n, d = X.shape
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        at = np.minimum((np.clip(X.data, 0.0, 1.0) * bins).astype(np.intp), bins - 1)
        flat = np.bincount(X.indices * bins + at, minlength=d * bins).reshape(d, bins)
        flat[:, 0] += n - np.bincount(X.indices, minlength=d)
        return flat
    X = np.asarray(X, dtype=np.float64)
    counts = np.zeros(d * bins, dtype=np.int64)
    offsets = np.arange(d, dtype=np.intp) * bins
    step = max(1, _CHUNK_CELLS // max(d, 1))
    for start in range(0, n, step):
        part = np.clip(X[start : start + step], 0.0, 1.0) * bins
        at = np.minimum(part.astype(np.intp), bins - 1)
        at += offsets
        counts += np.bincount(at.ravel(), minlength=d * bins)
    return counts.reshape(d, bins)


# --- the log writer's side (its thread; ``admit`` under the queue's lock) -----------------------


@dataclass
class _State:
    # Queued feature values: ``admitted`` grows under the queue's lock (requests), ``released``
    # in the writer's thread; each has one writer at a time, so neither needs a lock of its own.
    admitted: int = 0
    released: int = 0
    dropped_rows: int = 0  # rows queued without their features (QUEUE_CELLS)
    lock: threading.Lock = field(default_factory=threading.Lock)  # ``open``
    open: dict[tuple[int, datetime], list[Any]] = field(default_factory=dict)
    next_write: float = 0.0
    next_retention: float = 0.0
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    @property
    def cells(self) -> int:
        return self.admitted - self.released


def new_state() -> _State:
    """The counts and feature budget a new prediction log writer starts with (it keeps them
    as its ``drift``)."""
    return _State(next_write=time.monotonic() + WRITE_SECONDS)


def state(writer: Any) -> _State:
    """``writer``'s counts not yet written, and its queue's feature budget."""
    return writer.drift


def admit(writer: Any, entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """The log entry to queue (called under the queue's lock): as given, or without its
    features (the last item) when the model is too wide or the queue holds ``QUEUE_CELLS``
    feature values already. O(1), no lock of its own."""
    features = entry[9] if len(entry) > 9 else None
    if features is None:
        return entry
    if features.ndim != 2 or features.shape[1] > MAX_FEATURES:
        return (*entry[:9], None)
    cells = _cells(features)
    found = state(writer)
    if found.admitted - found.released + cells > QUEUE_CELLS:
        found.dropped_rows += features.shape[0]
        return (*entry[:9], None)
    found.admitted += cells
    return entry


def record(writer: Any, batch: list[tuple[Any, ...]]) -> None:
    """Count the features of a batch taken off ``writer``'s queue into its open minutes: the
    entries of one model, minute and kind (dense or CSR) stacked and counted at once."""
    found = state(writer)
    groups: dict[tuple[int, datetime, bool], list[Any]] = {}
    times: dict[tuple[int, datetime, bool], list[np.ndarray]] = {}
    for entry in batch:
        features = entry[9] if len(entry) > 9 else None
        if features is None:
            continue
        sparse = not isinstance(features, np.ndarray)
        found.released += features.nnz if sparse else features.size
        minute = entry[4].astimezone(UTC).replace(second=0, microsecond=0)
        key = (int(entry[0]), minute, sparse)
        groups.setdefault(key, []).append(features)
        times.setdefault(key, []).append(np.full(features.shape[0], entry[4].timestamp()))
    for (model_id, minute, sparse), parts in groups.items():
        if len({p.shape[1] for p in parts}) != 1:  # (one model: one width)
            continue
        X = parts[0] if len(parts) == 1 else sp.vstack(parts, "csr") if sparse else np.vstack(parts)
        counts = bin_counts(X)
        at = np.concatenate(times[(model_id, minute, sparse)])
        with found.lock:
            held = found.open.get((model_id, minute))
            if held is None:
                found.open[(model_id, minute)] = [X.shape[0], counts,
                                                  samples.merge(None, X, at, found.rng)]
            elif held[1].shape == counts.shape:
                held[0] += X.shape[0]
                held[1] += counts
                held[2] = samples.merge(held[2], X, at, found.rng)


def write(writer: Any, *, force: bool = False) -> None:
    """Write ``writer``'s open counts (each ``WRITE_SECONDS``, or now with ``force``) and
    delete counts older than the log's retention days (each ``RETENTION_SECONDS``); failures
    are logged, never raised (the counts of a failed write are lost)."""
    found = state(writer)
    now = time.monotonic()
    try:
        if force or now >= found.next_write:
            found.next_write = now + WRITE_SECONDS
            with found.lock:
                taken, found.open = found.open, {}
            _insert(writer.engine, taken)
        if now >= found.next_retention:
            found.next_retention = now + RETENTION_SECONDS
            cutoff = datetime.now(UTC) - timedelta(days=writer.days)
            with writer.engine.begin() as conn:
                conn.execute(delete(FeatureCounts).where(FeatureCounts.minute < cutoff))
    except Exception as exc:  # (the database away: one line, no traceback)
        log.warning("feature counts: write failed (%s); those counts are lost", type(exc).__name__)


def _insert(engine: Any, taken: dict[tuple[int, datetime], list[Any]]) -> None:
    if not taken:
        return
    rows = [
        {
            "model_id": model_id,
            "minute": minute,
            "n_rows": n,
            "n_features": counts.shape[0],
            "bins": counts.shape[1],
            "counts": np.ascontiguousarray(counts, dtype="<u4").tobytes(),
            **samples.columns(sample),
        }
        for (model_id, minute), (n, counts, sample) in taken.items()
    ]
    with engine.begin() as conn:
        conn.execute(insert(FeatureCounts), rows)


# --- the report's side --------------------------------------------------------------------------


def skip_reason(n_features: int, scaled: bool) -> str | None:
    """Why a model's features are not compared, or None."""
    if not scaled:
        return "the model was trained without min-max scaling (scaling: none)"
    if n_features > MAX_FEATURES:
        return f"{n_features} features: per-feature drift is kept for at most {MAX_FEATURES}"
    return None


def live_counts(
    session: Session, model_id: int, n_features: int, since: datetime | None, until: datetime | None
) -> tuple[int, np.ndarray]:
    """The model's logged rows' counts summed over the minutes in [since (rounded down to the
    minute), until): (rows, (n_features, BINS) counts)."""
    stmt = select(FeatureCounts.n_rows, FeatureCounts.n_features, FeatureCounts.bins,
                  FeatureCounts.counts).where(FeatureCounts.model_id == model_id)  # fmt: skip
    if since is not None:
        if since.tzinfo is None:  # (naive: UTC, as app.core.orm.UTCDateTime takes it)
            since = since.replace(tzinfo=UTC)
        start = since.astimezone(UTC).replace(second=0, microsecond=0)
        stmt = stmt.where(FeatureCounts.minute >= start)
    if until is not None:
        stmt = stmt.where(FeatureCounts.minute < until)
    total = np.zeros((n_features, BINS), dtype=np.int64)
    n = 0
    for rows, d, bins, blob in session.execute(stmt):
        if d != n_features or bins != BINS:  # (not this model's shape: never written so)
            continue
        total += np.frombuffer(blob, dtype="<u4").reshape(d, bins)
        n += rows
    return n, total


def compare(
    reference: np.ndarray, live: np.ndarray, n_live: int, names: list[str]
) -> dict[str, Any]:
    """Per-feature binned KS between the reference and live counts (module docstring): the
    ``TOP_FEATURES`` features with the largest statistic, first the largest, and how many
    drifted."""
    n_ref = int(reference[0].sum()) if len(reference) else 0
    d = len(names)
    threshold = DRIFT_P_VALUE / max(d, 1)
    head = {"method": "ks_binned", "bins": BINS, "threshold": threshold,
            "n_reference": n_ref, "n_live": n_live, "n_features": d}  # fmt: skip
    if n_live == 0 or n_ref == 0 or d == 0:
        return head | {"drifted_count": None, "features": [], "skipped": "no live feature counts"}
    gap = np.abs(np.cumsum(reference, axis=1) / n_ref - np.cumsum(live, axis=1) / n_live).max(
        axis=1
    )
    en = n_ref * n_live / (n_ref + n_live)
    p = np.clip(kstwo.sf(gap, np.round(en)), 0.0, 1.0)
    drifted = p < threshold
    order = np.argsort(-gap, kind="stable")[:TOP_FEATURES]
    top = [
        {
            "name": str(names[j]),
            "statistic": float(gap[j]),
            "p_value": float(p[j]),
            "drifted": bool(drifted[j]),
        }
        for j in order
    ]
    return head | {"drifted_count": int(drifted.sum()), "features": top, "skipped": None}
