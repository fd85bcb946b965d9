"""A bounded uniform sample of each model's logged rows' scaled features (issue 47), kept per
model and minute beside the feature counts (``app.monitoring.feature_drift``) in
``feature_counts.sample`` / ``sample_at``: what the report's domain classifier
(``app.monitoring.domain``) compares with the model's reference.

The log's writer thread gives every row it counts a random priority and keeps, per model and
minute, the ``capacity`` rows of smallest priority (a uniform sample without replacement of
the minute's rows, merged batch by batch), at most ``SAMPLE_ROWS`` rows and ``SAMPLE_CELLS``
values; a CSR batch is densified only in the rows kept. Values are the scaled (clipped) features
as little-endian uint16 (value × 65535: a resolution of 1.5e-5 of the training range), each
row with its time (float64 seconds), so the report filters the window [since, until) exactly.
The report reads the samples of at most ``READ_PARTS`` of the window's minutes (drawn with
chances proportional to their rows, seeded) and at most ``READ_ROWS`` of their rows (a seeded
subsample).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import scipy.sparse as sp
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.monitoring.orm import FeatureCounts

SAMPLE_ROWS = 1_000  # rows kept per model and minute at most
SAMPLE_CELLS = 250_000  # values (rows x features) kept per model and minute at most
READ_ROWS = 2_000  # sampled rows of a window the report reads at most
READ_PARTS = 40  # sampled minutes (feature_counts rows) a report reads at most
_SCALE = 65535.0


@dataclass
class Reservoir:
    """One model-minute's sample: priorities, the rows (uint16) and their times."""

    keys: np.ndarray
    rows: np.ndarray
    at: np.ndarray


def capacity(n_features: int) -> int:
    """How many rows a model-minute's sample keeps at most."""
    return max(1, min(SAMPLE_ROWS, SAMPLE_CELLS // max(n_features, 1)))


def _smallest(keys: np.ndarray, cap: int) -> np.ndarray:
    return np.arange(keys.size) if keys.size <= cap else np.argpartition(keys, cap - 1)[:cap]


def encode(X: np.ndarray) -> np.ndarray:
    """Scaled values in [0, 1] as uint16 (NaN as 0)."""
    return np.round(np.nan_to_num(np.clip(X, 0.0, 1.0)) * _SCALE).astype("<u2")


def merge(held: Reservoir | None, X: Any, at: np.ndarray, rng: np.random.Generator) -> Reservoir:
    """``held`` with the rows of ``X`` (dense or CSR, times ``at``) offered to it."""
    keys = rng.random(X.shape[0])
    pick = _smallest(keys, capacity(X.shape[1]))
    part = X[pick]
    part = part.toarray() if sp.issparse(part) else np.asarray(part, dtype=np.float64)
    new = Reservoir(keys[pick], encode(part), np.asarray(at, dtype=np.float64)[pick])
    if held is None or held.rows.shape[1] != new.rows.shape[1]:
        return new
    keys = np.concatenate([held.keys, new.keys])
    keep = _smallest(keys, capacity(X.shape[1]))
    return Reservoir(keys[keep], np.concatenate([held.rows, new.rows])[keep],
                     np.concatenate([held.at, new.at])[keep])


def columns(held: Reservoir | None) -> dict[str, bytes | None]:
    """The ``feature_counts`` columns of a sample (both None without one)."""
    if held is None:
        return {"sample": None, "sample_at": None}
    return {"sample": np.ascontiguousarray(held.rows, dtype="<u2").tobytes(),
            "sample_at": np.ascontiguousarray(held.at, dtype="<f8").tobytes()}


def _stamp(t: datetime) -> float:
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).timestamp()


def _parts(session: Session, model_id: int, since: datetime | None,
           until: datetime | None) -> list[int]:
    """The ids of the model's sampled minutes in the window (to the minute), at most
    ``READ_PARTS`` of them: drawn (seeded, without replacement) with chances proportional to
    the minute's rows, so a long window's rows are read in a bounded time."""
    stmt = select(FeatureCounts.id, FeatureCounts.n_rows).where(
        FeatureCounts.model_id == model_id, FeatureCounts.sample.is_not(None)
    ).order_by(FeatureCounts.id)
    if since is not None:
        # truncated to its minute as a datetime (through a float timestamp, the last valid
        # instant, 9999-12-31T23:59:59.999999, rounded into year 10000: a 500)
        aware = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
        start = aware.astimezone(UTC).replace(second=0, microsecond=0)
        stmt = stmt.where(FeatureCounts.minute >= start)
    if until is not None:
        stmt = stmt.where(FeatureCounts.minute < until)
    found = session.execute(stmt).all()
    if len(found) <= READ_PARTS:
        return [i for i, _ in found]
    weight = np.array([max(n, 1) for _, n in found], dtype=float)
    pick = np.random.default_rng(0).choice(len(found), READ_PARTS, replace=False,
                                           p=weight / weight.sum())
    return [found[k][0] for k in np.sort(pick)]


def window_rows(session: Session, model_id: int, n_features: int, since: datetime | None,
                until: datetime | None, limit: int = READ_ROWS) -> tuple[np.ndarray, int]:
    """The sampled rows of the model's window [since, until) as float64 (at most ``limit``: a
    seeded subsample) from at most ``READ_PARTS`` sampled minutes (``_parts``), and how many
    were read in all."""
    ids = _parts(session, model_id, since, until)
    low = -np.inf if since is None else _stamp(since)
    high = np.inf if until is None else _stamp(until)
    parts = []
    stmt = select(FeatureCounts.n_features, FeatureCounts.sample, FeatureCounts.sample_at).where(
        FeatureCounts.id.in_(ids)).order_by(FeatureCounts.id)
    for d, blob, at_blob in (session.execute(stmt) if ids else []):
        if d != n_features:
            continue
        at = np.frombuffer(at_blob, dtype="<f8")
        rows = np.frombuffer(blob, dtype="<u2").reshape(at.size, d)
        parts.append(rows[(at >= low) & (at < high)])
    if not parts:
        return np.zeros((0, n_features)), 0
    rows = np.concatenate(parts)
    total = rows.shape[0]
    if total > limit:
        rows = rows[np.sort(np.random.default_rng(0).choice(total, limit, replace=False))]
    return rows.astype(np.float64) / _SCALE, total
