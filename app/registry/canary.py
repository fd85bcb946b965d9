"""Which arm of an alias's canary answers a request (issue 48): ``route``.

An alias with a canary (``PUT /registered-models/{name}/aliases/{alias}`` with ``canary``)
names two versions: its own (the *primary* arm) and the canary's, which answers ``percent``
of the alias's requests. A request that carries a key (the ``X-Msvmav-Route-Key`` header, else
its first row's id) is routed by a hash of the registered model, the alias and the key alone
(``bucket``: SHA-256, a point of [0, 100)), so the same key always gets the same arm for a given
percentage, and raising the percentage only moves keys from the primary to the canary (a key
in the canary at 10 % stays there at 20 %). A request without a key draws its arm at random
with the percentage. The choice is made after the resolution, from what the resolution read
(the canary's model and stamp are read with the alias, in the same read), so it needs no read
of its own: inside app.core.recheck's window a canaried alias is served without any read, as
any alias is. One request is answered by one arm: its rows are never split between versions.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace

from app.registry.references import ResolvedModel, Stamp

#: The request header whose value routes a request to an arm (sticky).
ROUTE_KEY_HEADER = "X-Msvmav-Route-Key"
#: The answer's headers at every door: the version that answered and its arm.
VERSION_HEADER = "X-Msvmav-Model-Version"
ARM_HEADER = "X-Msvmav-Model-Arm"
_SCALE = 100.0 / 2.0**64
_random = random.SystemRandom()


def bucket(name: str, alias: str, key: str) -> float:
    """Where ``key`` falls in [0, 100) for alias ``name@alias``: the first 8 bytes of
    SHA-256 of ``name@alias`` and the key (separated by a NUL), as a fraction of 2**64."""
    digest = hashlib.sha256(f"{name}@{alias}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") * _SCALE


def in_canary(name: str, alias: str, percent: float, key: str | None) -> bool:
    """Does a request with ``key`` (None: none) go to a canary answering ``percent`` %?"""
    point = _random.random() * 100.0 if key is None else bucket(name, alias, key)
    return point < percent


def route(
    resolved: ResolvedModel, stamp: Stamp, key: str | None
) -> tuple[ResolvedModel, Stamp]:
    """The arm of ``resolved``'s canary that answers a request with ``key``: the canary's
    version (its model, stamp and carried rule; ``arm`` "canary") or the alias's own (``arm``
    "primary"). Without a canary, ``resolved`` itself. No I/O."""
    canary = resolved.canary
    if canary is None:
        return resolved, stamp
    assert resolved.name is not None and resolved.alias is not None
    if not in_canary(resolved.name, resolved.alias, canary.percent, key):
        return resolved, stamp
    chosen = replace(resolved, model_id=canary.model_id, version=canary.version,
                     rule=canary.rule, arm="canary")
    return chosen, canary.stamp
