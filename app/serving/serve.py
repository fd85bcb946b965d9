"""The one serving template every door answers through, after MLServer's DataPlane:

    admission -> acquire -> decode -> score -> sinks -> encode

A door (``Door``) is a codec only: it admits a request (limits checked before anything is
allocated for it and before the model is known), decodes it into the model's encoded rows
(``Batch``: the rows, their ids, the decision rule, true labels), and encodes the core's
``Scored`` rows as its answer. ``serve`` does the rest the same way for every door: the model is
acquired once (app.serving.acquire: no read while the request's checks are younger than
app.core.recheck's window), the rows scored by the one core (app.serving.scoring), and handed
to every registered sink (app.serving.sinks: the prediction log, a running shadow) exactly once,
before the answer is encoded.

A problem raised before the sinks ran recorded nothing: a caller may answer the request
another way (the /predict middleware hands it to the route, which refuses it with the usual
problem document). Anything raised after they ran is an ``AnsweredError``: the rows were
recorded, so the request must never be answered (and recorded) again. Where a request is
served (on the event loop, the fast lane, the pool) is a policy every door may use
(app.serving.lanes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from app.core.config import Settings
from app.core.problems import Problem
from app.core.runtime import Runtime
from app.models.decisions import Decision
from app.serving.acquire import acquire
from app.serving.model import ServedModel
from app.serving.scoring import row_ids, score
from app.serving.sinks import Scored, open_sinks
from app.serving.target import Target

_MODEL_ID: list[str | int] = ["body", "model_id"]
Request = TypeVar("Request", contravariant=True)
Answer = TypeVar("Answer", covariant=True)


@dataclass
class Batch:
    """A request decoded: the model's encoded rows and what labels and names them."""

    X: Any  # (n, n_features) float64, finite (the core scales it in place)
    ids: list[Any] | None = None  # the client's ids (checked: one per row), else generated
    ids_loc: tuple[str | int, ...] = ("body", "ids")
    rule: Decision | None = None  # the request's decision rule (None: the model's)
    explain: bool = False  # its cost checked by the door before (app.serving.explaining)
    y_true: np.ndarray | None = None  # the true labels as the model's classes, when given
    extra: dict[str, Any] | None = None  # what else the door's encoder needs of its decoding


class Door(Protocol[Request, Answer]):
    """A door's codec (see the module's docstring)."""

    def admit(self, request: Request, settings: Settings) -> None:
        """Refuse the request before anything is allocated for it (its size, its rows)."""
        ...

    def decode(
        self, request: Request, model: ServedModel, target: Target, settings: Settings
    ) -> Batch:
        """The request's rows encoded for ``model`` (and checked), its ids, its rule."""
        ...

    def encode(self, request: Request, batch: Batch, scored: Scored) -> Answer:
        """The answer, from the core's arrays (no Python object per row unless the answer is
        one)."""
        ...

    def refused(self, request: Request, problem: Problem, stage: str) -> Exception:
        """The door's answer to ``problem`` raised at ``stage`` ("acquire" or "decode"): the
        problem itself, or the protocol's own error."""
        ...


class AnsweredError(RuntimeError):
    """The request's rows were scored and recorded, and then its answer failed: it must not be
    answered again (that would record it twice)."""


def serve(
    runtime: Runtime,
    door: Door[Request, Answer],
    request: Request,
    ref: Target,
    *,
    loc: list[str | int] | None = _MODEL_ID,
    fresh_within: float | None = None,
) -> Answer:
    """The door's answer to ``request`` for the model ``ref`` names (see the module's
    docstring). ``loc`` names the request's ``model_id`` (a reference: ``model`` beside it);
    None: a 404 when it is gone); ``fresh_within``: the checks' window (default
    app.core.recheck's)."""
    settings = runtime.settings
    door.admit(request, settings)
    window = settings.serve_recheck_seconds if fresh_within is None else fresh_within
    try:
        model, target = acquire(runtime, ref, window, loc)
    except Problem as problem:
        raise door.refused(request, problem, "acquire") from None
    try:
        batch = door.decode(request, model, target, settings)
        ids = row_ids(batch.ids, batch.X.shape[0], list(batch.ids_loc))
    except Problem as problem:
        raise door.refused(request, problem, "decode") from None
    opened = open_sinks(runtime, target)
    raw = batch.X.copy() if opened.raw else None  # (before the core scales X in place)
    scores = score(model, batch.X, explain=batch.explain, rule=batch.rule)
    scored = Scored(model, target, ids, scores, raw)
    try:  # (a recorder that fails after another recorded the rows: recorded all the same)
        opened.record(scored)
        return door.encode(request, batch, scored)
    except Exception as exc:
        raise AnsweredError(f"the answer of a scored request failed: {exc!r}") from exc
