"""Model references of the protocol routes, resolved once per request.

A reference is a stored model's id (``42``); registered names (``credit``, ``credit/3``,
``credit@production``) are resolved by the registry once it is merged.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.ids import in_range
from app.models import service as models


class UnknownReference(LookupError):  # noqa: N818 - the registry's name
    """No model answers to the reference; ``str(exc)`` says which."""


@dataclass(frozen=True)
class ResolvedModel:
    model_id: int
    name: str | None = None
    version: int | None = None
    alias: str | None = None


def _stored_id(ref: str) -> int | None:
    return int(ref) if ref.isascii() and ref.isdigit() and in_range(int(ref)) else None


def resolve(session: Session, ref: str) -> ResolvedModel:
    """The model ``ref`` names (see the module docstring); UnknownReference if none."""
    model_id = _stored_id(ref.strip())
    if model_id is None or models.get(session, model_id) is None:
        raise UnknownReference(f"model {ref!r} not found")
    return ResolvedModel(model_id=model_id)


def resolve_serving(session: Session, name: str, version: str | None) -> ResolvedModel:
    """The model the Open Inference Protocol's ``/v2/models/{name}[/versions/{version}]``
    names: ``name`` is a reference as for ``resolve``; ``version`` a version of a registered
    name."""
    if version is not None:
        raise UnknownReference(f"model {name!r} has no version {version!r}")
    return resolve(session, name)
