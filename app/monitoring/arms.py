"""Each arm of an alias on its own rows (issue 48): what the prediction log holds of the rows a
registered model's alias answered, one record per version that answered them.

An alias with a canary (app.registry.canary) answers each request by one of two versions, and
the log records the version that answered (``prediction_log.version``, beside the alias that
named it). ``arm_records`` groups the alias's logged rows in a window by that version: rows,
rows with feedback, realised accuracy on them (the logged label against the fed-back one),
the mean decision value, the share clipped, the rows per predicted class, and when the first
and last row were logged. Each record says which arm its version is now (``primary``: the
alias's version, ``canary``: its canary's; ``other``: a version the alias pointed at earlier
in the window). The rows are the alias's only: a row of the same version asked for by
``name/version`` or by model id is not an arm's.

This is the one function the promotion policies read an arm's record with (issue 48's judge),
and what ``GET /registered-models/{name}/monitoring`` shows under ``arms``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.core.problems import missing
from app.monitoring import log as prediction_log
from app.monitoring.orm import PredictionLog
from app.registry import service as registry


@dataclass(frozen=True)
class ArmRecord:
    """One version's rows answered through an alias in a window (see the module's
    docstring). ``predicted_counts`` is indexed like the model's classes."""

    version: int
    model_id: int
    arm: str  # "primary", "canary" or "other"
    n: int
    n_labelled: int
    accuracy: float | None  # correct / n_labelled (None without feedback)
    mean_decision: float | None
    clipped_fraction: float | None
    predicted_counts: list[int]
    first_at: datetime | None
    last_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _window(stmt: Any, name: str, alias: str, since: datetime | None,
            until: datetime | None) -> Any:
    stmt = stmt.where(PredictionLog.registered_model == name, PredictionLog.alias == alias)
    if since is not None:
        stmt = stmt.where(PredictionLog.created_at >= since)
    if until is not None:
        stmt = stmt.where(PredictionLog.created_at < until)
    return stmt


def _totals(session: Session, name: str, alias: str, since: datetime | None,
            until: datetime | None) -> list[Any]:
    log = PredictionLog
    labelled = log.true_class.is_not(None)
    stmt = select(
        log.version, log.model_id, func.count(), func.count(log.true_class),
        func.sum(case((labelled & (log.true_class == log.predicted), 1), else_=0)),
        func.avg(log.decision), func.sum(case((log.clipped.is_(True), 1), else_=0)),
        func.min(log.created_at), func.max(log.created_at),
    ).group_by(log.version, log.model_id).order_by(log.version, log.model_id)
    return list(session.execute(_window(stmt, name, alias, since, until)))


def _class_counts(session: Session, name: str, alias: str, since: datetime | None,
                  until: datetime | None) -> dict[tuple[int, int], dict[int, int]]:
    log = PredictionLog
    stmt = select(log.version, log.model_id, log.predicted, func.count()).group_by(
        log.version, log.model_id, log.predicted)
    counts: dict[tuple[int, int], dict[int, int]] = {}
    for version, model_id, predicted, n in session.execute(
            _window(stmt, name, alias, since, until)):
        counts.setdefault((version, model_id), {})[int(predicted)] = int(n)
    return counts


def arm_records(
    session: Session,
    name: str,
    alias: str,
    since: datetime | None = None,
    until: datetime | None = None,
    writer: prediction_log.PredictionLogWriter | None = None,
) -> list[ArmRecord]:
    """The alias's logged rows in [since, until), one record per version that answered them
    (by version; see the module's docstring). 404 when the registered model or the alias does
    not exist. ``writer``: this process's log writer, whose queued rows are waited for first
    (at most its READ_WAIT_SECONDS, as every report)."""
    registered = registry.get_or_raise(session, name)
    primary = registry.aliases_of(session, registered).get(alias)
    if primary is None:
        raise missing(f"registered model {name!r} has no alias {alias!r}")
    canary = registry.canaries_of(session, registered).get(alias)
    return _records(session, name, alias, primary, canary, since, until, writer)


def _records(session: Session, name: str, alias: str, primary: int,
             canary: tuple[int, float] | None, since: datetime | None,
             until: datetime | None,
             writer: prediction_log.PredictionLogWriter | None) -> list[ArmRecord]:
    """``arm_records`` once the alias's version (``primary``) and canary are read."""
    if writer is not None:
        writer.state()
    counts = _class_counts(session, name, alias, since, until)
    records = []
    for version, model_id, n, n_labelled, correct, mean, clipped, first, last in _totals(
            session, name, alias, since, until):
        by_class = counts.get((version, model_id), {})
        width = max(by_class, default=-1) + 1
        arm = ("primary" if version == primary else
               "canary" if canary is not None and version == canary[0] else "other")
        records.append(ArmRecord(
            version=int(version), model_id=int(model_id), arm=arm, n=int(n),
            n_labelled=int(n_labelled),
            accuracy=float(correct) / n_labelled if n_labelled else None,
            mean_decision=None if mean is None else float(mean),
            clipped_fraction=float(clipped) / n if n else None,
            predicted_counts=[by_class.get(i, 0) for i in range(width)],
            first_at=first, last_at=last))
    return records



#: The newest rows of an arm ``arm_rows`` reads.
MAX_ARM_ROWS = 1_000_000


def arm_rows(session: Session, name: str, alias: str, version: int,
             since: datetime | None) -> dict[str, np.ndarray]:
    """The decision values (binary: (n,); more classes: the logged (n, k) vectors), predicted
    and fed-back classes (-1: none) of ``name@alias``'s rows that ``version`` answered since
    ``since``, the newest ``MAX_ARM_ROWS`` (the judge's estimate and cost, app.loop.judge)."""
    log = PredictionLog
    stmt = select(log.decision, log.decisions, log.predicted, log.true_class).where(
        log.version == version).order_by(log.id.desc()).limit(MAX_ARM_ROWS)
    rows = session.execute(_window(stmt, name, alias, since, None)).all()
    wide = bool(rows) and rows[0][1] is not None
    return {"decision": np.array([r[1] if wide else r[0] for r in rows], dtype=np.float64),
            "predicted": np.array([r[2] for r in rows], dtype=np.int64),
            "true": np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64)}


def alias_arms(
    session: Session,
    name: str,
    alias: str,
    since: datetime | None = None,
    until: datetime | None = None,
    writer: prediction_log.PredictionLogWriter | None = None,
) -> dict[str, Any] | None:
    """The registered report's ``arms``: the alias, its version and canary now, and
    ``arm_records``; None when the registered model has no such alias."""
    registered = registry.get_or_raise(session, name)
    version = registry.aliases_of(session, registered).get(alias)
    if version is None:
        return None
    canary = registry.canaries_of(session, registered).get(alias)
    records = _records(session, name, alias, version, canary, since, until, writer)
    return {
        "alias": alias,
        "version": version,
        "canary": None if canary is None else {"version": canary[0], "percent": canary[1]},
        "records": [r.as_dict() for r in records],
    }
