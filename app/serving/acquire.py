"""The one way a served model is acquired: ``acquire(runtime, ref, fresh_within)``, for every
door (/predict, /predict/file, batch, /v2, invocations, evaluation, explanation) and for the
rooms that score beside them (monitoring, shadow scoring, thresholds, the leaderboard, export).

``ref`` is a ``Target``: a stored model's id, or a registry reference still to resolve (by the
one resolver, app.registry.references, which reads the stored model's stamp with it). The
model's existence is checked on a pooled connection (``app.models.service.model_stamp``: no ORM
session) unless the reference's read gave its stamp just now; a check younger than
``fresh_within`` seconds (app.core.recheck's window) is trusted without any read. A cache miss
reads and rebuilds the model (app.models.loading) in a read-only transaction that ends here,
before the caller computes. 404 (or 422 naming ``loc``) when the model does not exist (any
more).

``held(runtime, ref)`` is the no-I/O question the fast lanes ask: is every check the request
needs younger than the window, so that its answer needs no read at all (and may be given on the
event loop)? Checks older than half the window are renewed in the background
(app.serving.refresh).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from sqlalchemy.orm import Session

from app.core import recheck
from app.core.db import begin_read
from app.core.problems import not_found
from app.core.runtime import Runtime
from app.models import service as models
from app.models.loading import rebuild
from app.registry.references import recalled, recalled_at
from app.serving import refresh
from app.serving.model import ServedModel, Stamp
from app.serving.target import Target, resolve_target, routed_to

_MODEL_ID: list[str | int] = ["body", "model_id"]


class Acquired(NamedTuple):
    """The served model and the request's target, resolved (with the stamp it was read with)."""

    model: ServedModel
    target: Target


def acquire(
    runtime: Runtime,
    ref: Target,
    fresh_within: float = 0.0,
    loc: list[str | int] | None = _MODEL_ID,
    *,
    ref_loc: list[str | int] | None = None,
    session: Session | None = None,
) -> Acquired:
    """The model ``ref`` names, ready to score (see the module's docstring). ``loc`` names the
    request's ``model_id`` field (None: a 404 when the model is gone), ``ref_loc`` its
    reference (a malformed one is a 422 naming it; default: ``model`` beside ``loc``). A miss is
    read in ``session`` when given (in its transaction), else in a session of its own."""
    if ref_loc is None:
        ref_loc = [*loc[:-1], "model"] if loc else ["path", "model_ref"]
    target = resolve_target(runtime, ref, ref_loc, fresh_within)
    assert target.model_id is not None
    cache = runtime.get(models.MODEL_CACHE)
    stamp, checked_at = target.stamp, None
    if stamp is None:
        held = _held_fresh(runtime, target.model_id, fresh_within)
        if held is not None:
            return Acquired(held, target)
        checked_at = recheck.now()
        stamp = models.model_stamp(runtime, target.model_id)
    if stamp is None:
        cache.drop(target.model_id)
        raise not_found("model", target.model_id, loc)
    hit = cache.current(target.model_id, stamp)
    if hit is None:
        hit = _read(runtime, target.model_id, stamp, loc, session)
        cache.put(hit, checked_at)
    elif checked_at is not None:
        cache.checked(target.model_id, checked_at)
    return Acquired(hit, target)


def _read(
    runtime: Runtime,
    model_id: int,
    stamp: Stamp,
    loc: list[str | int] | None,
    session: Session | None,
) -> ServedModel:
    """The stored model rebuilt, read in ``session`` (or in one of its own, ended here)."""
    if session is None:
        with runtime.sessions() as own:
            return _read(runtime, model_id, stamp, loc, own)
    began = not session.in_transaction()
    begin_read(session)
    served = cold(session, model_id, loc, stamp)
    if began:  # a read-only transaction of ours: ended before the caller computes
        session.commit()
    return served


def cold(
    session: Session, model_id: int, loc: list[str | int] | None = None, stamp: Stamp | None = None
) -> ServedModel:
    """The stored model read and rebuilt in ``session``, bypassing the cache (a cold load: what
    a cache miss does; tests compare a cached answer with it). 404 (422 naming ``loc``)."""
    row = models.get_or_raise(session, model_id, loc)
    rebuilt = rebuild(session, row)
    return ServedModel(
        id=row.id,
        n_features=row.n_features,
        encoding=row.encoding,
        estimator=rebuilt.estimator,
        scaling=rebuilt.scaling,
        rule=rebuilt.rule,
        stamp=stamp,
        nbytes=rebuilt.nbytes,
        algorithm=row.algorithm,
        feature_names=tuple(row.feature_names or ()),
    )


def _held_fresh(runtime: Runtime, model_id: int, seconds: float) -> ServedModel | None:
    """The cached model when its existence was checked less than ``seconds`` ago; else None.
    No I/O."""
    cache = runtime.get(models.MODEL_CACHE)
    hit = cache.get(model_id)
    if hit is not None and recheck.fresh(cache.checked_at(model_id), seconds):
        return hit
    return None


def holds(runtime: Runtime, model_id: int) -> bool:
    """Does this process's cache hold the model (whether still current or not)? No I/O."""
    return runtime.get(models.MODEL_CACHE).get(model_id) is not None


def held(runtime: Runtime, ref: Target) -> Target | None:
    """``ref`` resolved, with its model's stamp, when this process holds that model and every
    check the request needs is younger than app.core.recheck's window: its answer needs no
    read. None otherwise. No I/O."""
    seconds = runtime.settings.serve_recheck_seconds
    if seconds <= 0:
        return None
    cache = runtime.get(models.MODEL_CACHE)
    if not ref.pending:
        hit = _held_fresh(runtime, ref.model_id, seconds)
        if hit is None:
            return None
        if refresh.due(cache.checked_at(ref.model_id), seconds):  # renewed off the path
            runtime.get(refresh.REFRESHER).ahead(ref)
        return replace(ref, stamp=hit.stamp)
    assert ref.reference is not None
    memo = recalled(runtime, ref.reference, seconds)
    if memo is None:
        return None
    routed = routed_to(ref, *memo)  # (an alias's canary: the arm its key chooses, no read)
    if cache.current(routed.model_id, routed.stamp) is None:
        return None
    if refresh.due(recalled_at(runtime, ref.reference), seconds):
        runtime.get(refresh.REFRESHER).ahead(ref)
    return routed
