"""PUT, GET and DELETE /registered-models/{name}/shadow: start a shadow (a challenger alias
scoring the served version's rows, app.monitoring.shadow), report it, stop it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.core.orm import utcnow
from app.core.problems import Problem, invalid, missing, unknown
from app.core.runtime import Runtime, runtime_of
from app.models import service as models
from app.monitoring import log as prediction_log
from app.monitoring import report
from app.monitoring import shadow as scoring
from app.monitoring.orm import PredictionLog, ShadowPrediction, ShadowRun
from app.registry import service as registry
from app.registry.orm import ModelAlias, ModelVersion
from app.registry.references import SERVING_ALIAS, UnknownReference, resolve_serving
from app.serving.acquire import acquire
from app.serving.target import Target

# The newest scored rows a report reads at most.
MAX_REPORT_ROWS = 1_000_000
_ALIAS = ["body", "alias"]


def _latest_run(session: Session, registered_id: int) -> ShadowRun | None:
    return session.scalars(
        select(ShadowRun)
        .where(ShadowRun.registered_model_id == registered_id)
        .order_by(ShadowRun.id.desc())
        .limit(1)
    ).first()


def _check_challenger(session: Session, name: str, alias: str) -> None:
    """422 naming ``alias`` unless it names a version other than the served one whose classes
    and features are the served version's; 404 for an unknown registered model."""
    registry.check_name(alias, _ALIAS, "an alias")
    registered = registry.get_or_raise(session, name)
    if alias == SERVING_ALIAS:
        raise invalid(_ALIAS, f"the challenger cannot be the served alias {SERVING_ALIAS!r}")
    row = session.get(ModelAlias, (registered.id, alias))
    if row is None:
        raise unknown(_ALIAS, f"registered model {name!r} has no alias {alias!r}")
    challenger_id = session.get(ModelVersion, (registered.id, row.version)).model_id
    try:
        served = resolve_serving(session, name)
    except UnknownReference as exc:  # (it has a version: the alias's)
        raise missing(str(exc)) from None
    which = "production" if served.alias else "the newest version"
    if challenger_id == served.model_id:
        raise invalid(
            _ALIAS,
            f"alias {alias!r} points at version {row.version} (model {challenger_id}), the "
            f"version {which} serves; a shadow compares two different models",
        )
    try:
        runtime = runtime_of(session)
        ours = acquire(runtime, Target(served.model_id), 0.0, None, session=session).model
        theirs = acquire(runtime, Target(challenger_id), 0.0, None, session=session).model
    except Problem as problem:
        raise invalid(_ALIAS, problem.detail) from None
    wrong = scoring.mismatch(ours, theirs)
    if wrong is not None:
        field, message = wrong
        raise invalid(
            _ALIAS,
            f"{field} differ: the challenger (version {row.version}) cannot score the rows of "
            f"version {served.version} ({which}): {message}",
        )


def start(session: Session, runtime: Runtime, name: str, alias: str) -> ShadowRun:
    """Start scoring the served rows with ``alias`` (a running shadow of another alias is
    stopped first; of the same alias, kept); committed."""
    _check_challenger(session, name, alias)
    session.commit()
    registered = registry.get_or_raise(session, name, lock=True)
    run = _latest_run(session, registered.id)
    if run is None or run.stopped_at is not None or run.alias != alias:
        if run is not None and run.stopped_at is None:
            run.stopped_at = utcnow()
        run = ShadowRun(registered_model_id=registered.id, alias=alias, started_at=utcnow())
        session.add(run)
    session.commit()
    scoring.scorer(runtime).refresh()
    return run


def stop(session: Session, runtime: Runtime, name: str) -> None:
    """Stop the running shadow (its scored rows stay for GET); 404 when none runs."""
    registered = registry.get_or_raise(session, name, lock=True)
    run = _latest_run(session, registered.id)
    if run is None or run.stopped_at is not None:
        raise missing(f"registered model {name!r} has no running shadow")
    run.stopped_at = utcnow()
    run_id = run.id
    session.commit()
    scorer = scoring.scorer(runtime)
    scorer.forget(run_id)
    scorer.refresh()


def _live(
    session: Session, decision: np.ndarray, clipped: np.ndarray, model_ids: list[int]
) -> dict[str, Any]:
    """The monitoring report's ``live`` part of one side's rows (θ̂: the newest model's)."""
    model = models.get(session, model_ids[-1]) if model_ids else None
    ref = report.reference(session, model) if model is not None else None
    part = report.describe(decision, ref["theta"] if ref else None)
    part["clipped_fraction"] = float(np.mean(clipped)) if clipped.size else None
    return part


def _feedback(session: Session, run_id: int) -> tuple[int, float | None, float | None]:
    """Rows with feedback (the served model's logged row of the same id has a true class): how
    many, and the served and the challenger's accuracy on them."""
    sp, pl = ShadowPrediction, PredictionLog
    rows = session.execute(
        select(sp.id, sp.predicted, sp.served_predicted, pl.true_class)
        .join(pl, and_(pl.model_id == sp.served_model_id, pl.prediction_id == sp.prediction_id))
        .where(sp.run_id == run_id, pl.true_class.is_not(None))
        .distinct()
    ).all()
    if not rows:
        return 0, None, None
    table = np.array([r[1:] for r in rows], dtype=np.int64)
    true = table[:, 2]
    return len(rows), float(np.mean(table[:, 1] == true)), float(np.mean(table[:, 0] == true))


#: ``paired_rows``' true class of a row without feedback.
NO_LABEL = -1


def paired_rows(session: Session, registered_id: int, challenger_id: int, served_id: int,
                since: datetime) -> dict[str, np.ndarray]:
    """Stored model ``challenger_id``'s shadow rows beside ``served_id``'s on the same live
    rows of registered model ``registered_id`` scored since ``since`` (whatever shadow run
    scored them), one per prediction id (its newest; at most the newest ``MAX_REPORT_ROWS``):
    arrays ``predicted``, ``served_predicted``, ``decision``, ``served_decision`` (the
    predicted class's score for more than two classes) and ``true`` (the served model's
    logged row's fed-back class, ``NO_LABEL`` without)."""
    sp, pl = ShadowPrediction, PredictionLog
    mine = (ShadowRun.registered_model_id == registered_id, sp.model_id == challenger_id,
            sp.served_model_id == served_id, sp.created_at >= since)
    scored = (select(sp.prediction_id, sp.predicted, sp.served_predicted, sp.decision,
                     sp.served_decision)
              .join(ShadowRun, ShadowRun.id == sp.run_id).where(*mine)
              .order_by(sp.id.desc()).limit(MAX_REPORT_ROWS))
    rows = {pid: rest for pid, *rest in reversed(session.execute(scored).all())}
    truth = dict(session.execute(
        select(pl.prediction_id, pl.true_class)
        .join(sp, and_(pl.model_id == sp.served_model_id, pl.prediction_id == sp.prediction_id))
        .join(ShadowRun, ShadowRun.id == sp.run_id)
        .where(*mine, pl.true_class.is_not(None))).all())
    table = np.array(list(rows.values()), dtype=np.float64).reshape(-1, 4)
    return {
        "predicted": table[:, 0].astype(np.int64),
        "served_predicted": table[:, 1].astype(np.int64),
        "decision": table[:, 2], "served_decision": table[:, 3],
        "true": np.array([truth.get(p, NO_LABEL) for p in rows], dtype=np.int64),
    }


def head_to_head(session: Session, registered_id: int, challenger_id: int, served_id: int,
                 since: datetime, paired: dict[str, np.ndarray] | None = None
                 ) -> dict[str, Any]:
    """The challenger's shadow record against the served model on ``paired_rows`` (read
    unless given): ``n`` rows, ``agreement``, and on the ``labelled`` ones (fed back to the
    served model's log) each side's realised accuracy."""
    if paired is None:
        paired = paired_rows(session, registered_id, challenger_id, served_id, since)
    ours, theirs, true = paired["predicted"], paired["served_predicted"], paired["true"]
    n, fed = len(true), true != NO_LABEL
    return {
        "challenger_model_id": challenger_id, "served_model_id": served_id,
        "since": since, "n": n,
        "agreement": float(np.mean(ours == theirs)) if n else None,
        "labelled": int(fed.sum()),
        "challenger_accuracy": float(np.mean(ours[fed] == true[fed])) if fed.any() else None,
        "served_accuracy": float(np.mean(theirs[fed] == true[fed])) if fed.any() else None,
    }


def shadow_report(session: Session, runtime: Runtime, name: str) -> dict[str, Any]:
    """The registered model's latest shadow (running or stopped) and its scored rows."""
    # This process's queued rows (scored, logged): waited for a bounded time, never for the
    # threads; the answer says how many still wait.
    scorer = scoring.scorer(runtime)
    shadow_pending = scorer.catch_up(prediction_log.READ_WAIT_SECONDS)
    writer = prediction_log.writer(runtime)
    state = writer.state() if writer is not None else None
    registered = registry.get_or_raise(session, name)
    run = _latest_run(session, registered.id)
    if run is None:
        raise missing(f"registered model {name!r} has no shadow")
    sp = ShadowPrediction
    rows = session.execute(
        select(
            sp.model_id,
            sp.served_model_id,
            sp.decision,
            sp.predicted,
            sp.clipped,
            sp.served_decision,
            sp.served_predicted,
            sp.served_clipped,
        )  # fmt: skip
        .where(sp.run_id == run.id)
        .order_by(sp.id.desc())
        .limit(MAX_REPORT_ROWS)
    ).all()
    cols = list(zip(*rows, strict=True)) if rows else [()] * 8
    arrays = [np.asarray(c) for c in cols]
    n = len(rows)
    agree = float(np.mean(arrays[3] == arrays[6])) if n else None
    labelled, served_acc, challenger_acc = _feedback(session, run.id)
    # model ids oldest first (rows were read newest first)
    challenger_ids = list(dict.fromkeys(int(i) for i in reversed(cols[0])))
    served_ids = list(dict.fromkeys(int(i) for i in reversed(cols[1])))
    answer = {
        "name": name,
        "alias": run.alias,
        "running": run.stopped_at is None,
        "started_at": run.started_at,
        "stopped_at": run.stopped_at,
        "n": n,
        "agreement": agree,
        "labelled": labelled,
        "production": {
            "model_ids": served_ids,
            "live": _live(session, arrays[5].astype(float), arrays[7].astype(bool), served_ids),
            "accuracy": served_acc,
        },
        "challenger": {
            "model_ids": challenger_ids,
            "live": _live(session, arrays[2].astype(float), arrays[4].astype(bool), challenger_ids),
            "accuracy": challenger_acc,
        },
    }
    answer["log"] = state
    answer["shadow_pending_rows"] = shadow_pending
    session.commit()
    return answer
