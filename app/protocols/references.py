"""Model references of the protocol routes, resolved once per request by the registry
(``app.registry.references``): ``credit@production``, ``credit/3``, ``credit`` (its
``production`` version when set, else its newest, as at every door) or a stored model's id
``42``.

The Open Inference Protocol names a model and, optionally, a version:
``/v2/models/{name}[/versions/{version}]``. ``{name}`` alone is the registered model's
``production`` alias when set, else its newest version; a stored model's id and an
``name@alias`` reference work there too.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.registry.service import ResolvedModel, UnknownReference, resolve
from app.registry.service import resolve_serving as registry_serving

__all__ = ["ResolvedModel", "UnknownReference", "resolve", "resolve_serving"]


def resolve_serving(session: Session, name: str, version: str | None) -> ResolvedModel:
    """The model ``/v2/models/{name}[/versions/{version}]`` names; UnknownReference if none."""
    if version is not None:
        if not (version.isascii() and version.isdigit() and len(version) <= 12):
            raise UnknownReference(f"model version {version[:40]!r} is not a version number")
        if name.isdigit():
            raise UnknownReference(
                f"model {name} is a stored model's id; it has no versions (use a registered name)"
            )
        return registry_serving(session, name, int(version))
    if name.isdigit() or "@" in name:
        return resolve(session, name)
    return registry_serving(session, name)
