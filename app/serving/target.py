"""Which model a request names at any door: ``model_id``, or ``model``, a registry reference
(``credit@production``, ``credit/3``, ``credit``), resolved once per request.

A reference is resolved by the one resolver (app.registry.references.resolve_request) with the
stored model's stamp in one read, so ``app.serving.acquire`` needs no second one, and the
request uses that one model throughout: an alias moved meanwhile changes the next request,
never half of this one. A resolution younger than app.core.recheck's window is used without
reading again (1 s by default).

A door's target is ``routed``: an alias with a canary (app.registry.canary) answers it by one of
its two arms, chosen from the request's ``route_key`` after the resolution (no read of its
own). Every other reader of a reference (export, thresholds, evaluation, monitoring) is not
routed and gets the alias's own version, with its canary beside (``resolved.canary``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.problems import invalid
from app.core.runtime import Runtime
from app.registry.canary import ARM_HEADER, VERSION_HEADER, route
from app.registry.references import ResolvedModel, Stamp, resolve_request


@dataclass(frozen=True)
class Target:
    """``model_id`` known (from the request, or resolved with the stored model's ``stamp``),
    or ``reference`` still to resolve."""

    model_id: int | None = None
    reference: str | None = None
    resolved: ResolvedModel | None = None
    stamp: Stamp | None = None
    routed: bool = False  # a door's request: an alias's canary may answer it
    route_key: str | None = None  # what routes it to an arm (None: drawn at random)

    @property
    def pending(self) -> bool:
        return self.model_id is None


def target_of(
    model_id: int | None, model: str | None, loc: list[str | int], *, routed: bool = False,
    route_key: str | None = None,
) -> Target:
    """The request's target; 422 unless exactly one of ``model_id`` and ``model`` is given
    (``loc`` is the place of ``model``, e.g. ``["body", "model"]``). ``routed``: a door's
    request, which an alias's canary may answer (by ``route_key``)."""
    if (model_id is None) == (model is None):
        raise invalid(loc, "give exactly one of model (a reference) and model_id")
    if model is None:
        return Target(model_id=model_id)
    return Target(reference=model, routed=routed, route_key=route_key)


def route_key(header: str | None, ids: list[Any] | None = None) -> str | None:
    """What routes a door's request to an arm of a canary (app.registry.canary): the
    ``X-Msvmav-Route-Key`` header's value when given, else the request's first row id (the
    client's), else None (drawn at random)."""
    if header:
        return header
    if ids:
        return str(ids[0])
    return None


def routed_to(target: Target, resolved: ResolvedModel, stamp: Stamp) -> Target:
    """``target`` resolved to ``resolved``: to the arm its route key chooses when it is a
    door's (``routed``), else to the alias's own version. No I/O."""
    if target.routed:
        resolved, stamp = route(resolved, stamp, target.route_key)
    return Target(resolved.model_id, target.reference, resolved, stamp, target.routed,
                  target.route_key)


def resolve_target(
    runtime: Runtime, target: Target, loc: list[str | int], seconds: float = 0.0
) -> Target:
    """``target`` with its model id (a reference: read now, with the stamp, unless a read of
    it is younger than ``seconds``: app.core.recheck); a malformed reference is a 422 naming
    ``loc``, an unknown one a 404 naming what is missing."""
    if not target.pending:
        return target
    assert target.reference is not None
    resolved, stamp = resolve_request(runtime, target.reference, loc, seconds)
    return routed_to(target, resolved, stamp)


def reference_fields(target: Target) -> dict[str, Any]:
    """The answer's ``model``, ``version`` (the one that answered) and ``alias`` (null for a
    request by id)."""
    resolved = target.resolved
    return {
        "model": resolved.name if resolved else None,
        "version": resolved.version if resolved else None,
        "alias": resolved.alias if resolved else None,
    }


def answer_headers(target: Target) -> dict[str, str]:
    """The headers every door's answer carries when a registered model answered: the version
    that answered and, with a canary, its arm (app.registry.canary)."""
    resolved = target.resolved
    if resolved is None:
        return {}
    return version_headers(resolved.version, resolved.arm)


def version_headers(version: int | None, arm: str | None) -> dict[str, str]:
    """``X-Msvmav-Model-Version`` (when a registered version answered) and
    ``X-Msvmav-Model-Arm`` (when its alias has a canary)."""
    headers = {} if version is None else {VERSION_HEADER: str(version)}
    if arm is not None:
        headers[ARM_HEADER] = arm
    return headers
