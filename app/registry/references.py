"""The one resolver of model references, used by every door: ``credit@production`` (an
alias), ``credit/3`` (a version), ``credit`` (the served version: the one its ``production``
alias points at when set, else its newest) or ``42`` (a stored model's id). A bare name means the
same at every door (/predict, /predict/file, batch, /v2, invocations, feedback, monitoring,
shadow scoring, the client): ``lookup`` is the one place it is read, and ``BARE_NAME`` the one
sentence the OpenAPI descriptions say it with.

Doors: ``resolve_request`` (a request's reference, 422/404 naming the field; /predict,
/predict/file, batch, feedback), ``resolve`` (a reference in a session; invocations),
``resolve_path`` (``/v2/models/{name}[/versions/{version}]``), ``resolve_serving`` (a
registered model's served version; monitoring and shadow scoring).

A reference resolves in **one** indexed read that also returns the stored model's stamp (the
``(job_id, created_at, its decision rule)`` that ``app.serving.acquire`` compares with
its cache: a rule set since makes a cached copy stale) and an alias's own rule, so
predicting by reference costs no more round trips than predicting by id. One request uses the
one model it resolved. Each resolution read is remembered per database (``remember``), and the
predict path may use it instead of reading again while it is younger than app.core.recheck's
window (``recalled``; 1 s by default: an alias moved by another process is seen within it;
with a window of 0 every request reads the alias afresh). A process that changes a
registered model's versions or aliases forgets what it remembered (``forget``) at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from app.core import recheck
from app.core.db import placeholders
from app.core.ids import in_range
from app.core.problems import invalid, missing
from app.core.runtime import Part, Runtime, session_runtime

#: Names of registered models and aliases: 1–100 characters, letters, digits, ``.``, ``_``,
#: ``-``, starting with a letter or digit.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
_NAME = re.compile(NAME_PATTERN)
_REFERENCE = re.compile(
    rf"(?P<name>{NAME_PATTERN})(?:@(?P<alias>{NAME_PATTERN})|/(?P<version>[0-9]{{1,12}}))?"
)
#: NAME_PATTERN less the names that are all digits, as the OpenAPI document states it: one
#: regular expression without look-ahead (ECMA-262 and Python read it alike, and generators such
#: as schemathesis' can draw from it); the 100-character bound is the schema's maxLength.
OPENAPI_NAME_PATTERN = (
    r"(?:[A-Za-z][A-Za-z0-9._-]{0,99}|[0-9]{1,99}[A-Za-z._-][A-Za-z0-9._-]{0,98})"
)
#: A model reference (``parse``) as the OpenAPI document states it: a model id, ``name``,
#: ``name@alias`` or ``name/version``.
OPENAPI_REFERENCE_PATTERN = (
    rf"^(?:[0-9]{{1,12}}|{OPENAPI_NAME_PATTERN}(?:@{NAME_PATTERN}|/[0-9]{{1,12}})?)$"
)
#: The alias a bare name prefers.
SERVING_ALIAS = "production"
#: What a bare registered name means, as every door's OpenAPI description says it.
BARE_NAME = (
    f"`name` alone: the version its `{SERVING_ALIAS}` alias points at when set, else its newest "
    "version (the same at every door)"
)

# A stored model's stamp, as app.models.service.model_stamp reads it.
Stamp = tuple[Any, ...]
# Runs one read (``?`` placeholders) and returns its first row, or None.
Reader = Callable[[str, tuple[Any, ...]], tuple[Any, ...] | None]


@dataclass(frozen=True)
class Canary:
    """An alias's canary as its resolution read it: the version answering ``percent`` of its
    requests, that version's stored model and stamp, and the alias's rule carried to it."""

    version: int
    percent: float
    model_id: int
    stamp: Stamp
    rule: str | None = None


@dataclass(frozen=True)
class ResolvedModel:
    model_id: int
    name: str | None = None  # set when resolved from a registered-model reference
    version: int | None = None
    alias: str | None = None
    rule: str | None = None  # the alias's own decision rule (JSON text), when it has one
    canary: Canary | None = None  # the alias's canary, when it has one (see ``route``)
    arm: str | None = None  # with a canary: "primary" or "canary" (the arm this resolves to)


class UnknownReference(LookupError):  # noqa: N818 - the name is the shared interface's
    """Nothing answers to the reference; ``str(exc)`` names what was not found, e.g.
    ``registered model 'credit' has no alias 'production'``."""


class InvalidReference(UnknownReference):
    """The text is no reference at all (``str(exc)`` says why). A kind of UnknownReference, so
    that a caller who names models in a URL path answers 404 for both."""


@dataclass(frozen=True)
class Reference:
    """A parsed reference: ``model_id``, or ``name`` with at most one of ``alias`` and
    ``version``."""

    text: str
    model_id: int | None = None
    name: str | None = None
    alias: str | None = None
    version: int | None = None


def is_name(text: str) -> bool:
    """A valid registered-model or alias name (all digits is not: it reads as a model id)."""
    return bool(_NAME.fullmatch(text)) and not text.isdigit()


@lru_cache(maxsize=4096)
def parse(text: str) -> Reference:
    """The reference ``text`` names; InvalidReference when it is none."""
    if text.isascii() and text.isdigit() and len(text) <= 12:
        return Reference(text, model_id=int(text))
    match = _REFERENCE.fullmatch(text)
    if match is None or match["name"].isdigit():
        raise InvalidReference(
            f"{text[:120]!r} is not a model reference: expected 'name', 'name@alias', "
            "'name/version' or a model id (names: 1-100 letters, digits, '.', '_', '-', "
            "starting with a letter or digit, not all digits)"
        )
    version = match["version"]
    return Reference(
        text,
        name=match["name"],
        alias=match["alias"],
        version=int(version) if version is not None else None,
    )


# (model id, version, the model's stamp: job_id, created_at, its rule; the alias's rule)
_COLUMNS = "SELECT v.model_id, v.version, m.job_id, m.created_at, mr.rule"
_MODEL_RULE = "LEFT JOIN model_rules mr ON mr.model_id = m.id "
# An alias's canary, in the same read (its version, percent, carried rule, and its model's id
# and stamp), joined on the alias ``{a}``: the last seven columns of an alias's read.
_CANARY_COLUMNS = (", c.version, c.percent, c.rule, cv.model_id, cm.job_id, cm.created_at, "
                   "cmr.rule ")
_CANARY = (
    "LEFT JOIN alias_canaries c ON c.registered_model_id = r.id AND c.alias = {a}.alias "
    "LEFT JOIN model_versions cv ON cv.registered_model_id = r.id AND cv.version = c.version "
    "LEFT JOIN models cm ON cm.id = cv.model_id "
    "LEFT JOIN model_rules cmr ON cmr.model_id = cm.id "
)
_BY_ALIAS = (
    _COLUMNS + ", ar.rule" + _CANARY_COLUMNS + "FROM registered_models r "
    "JOIN model_aliases a ON a.registered_model_id = r.id "
    "JOIN model_versions v ON v.registered_model_id = r.id AND v.version = a.version "
    "JOIN models m ON m.id = v.model_id " + _MODEL_RULE +
    "LEFT JOIN alias_rules ar ON ar.registered_model_id = r.id AND ar.alias = a.alias "
    + _CANARY.format(a="a") + "WHERE r.name = ? AND a.alias = ?"
)
_BY_VERSION = (
    _COLUMNS + ", NULL FROM registered_models r "
    "JOIN model_versions v ON v.registered_model_id = r.id "
    "JOIN models m ON m.id = v.model_id " + _MODEL_RULE + "WHERE r.name = ? AND v.version = ?"
)
_BY_ID = ("SELECT m.id, NULL, m.job_id, m.created_at, mr.rule, NULL FROM models m "
          + _MODEL_RULE + "WHERE m.id = ?")
# The serving alias's version when set (its version is the last column), else the newest one.
_SERVING = (
    "SELECT v.model_id, v.version, m.job_id, m.created_at, mr.rule, ar.rule"
    + _CANARY_COLUMNS + ", p.version FROM registered_models r "
    "LEFT JOIN model_aliases p ON p.registered_model_id = r.id AND p.alias = ? "
    "LEFT JOIN alias_rules ar ON ar.registered_model_id = r.id AND ar.alias = p.alias "
    "JOIN model_versions v ON v.registered_model_id = r.id AND v.version = COALESCE(p.version, "
    "(SELECT MAX(w.version) FROM model_versions w WHERE w.registered_model_id = r.id)) "
    "JOIN models m ON m.id = v.model_id " + _MODEL_RULE + _CANARY.format(a="p")
    + "WHERE r.name = ?"
)
_MODEL_EXISTS = "SELECT id FROM registered_models WHERE name = ?"


def lookup(read: Reader, ref: Reference) -> tuple[ResolvedModel, Stamp]:
    """The model ``ref`` names and its stamp, in one read (a second one only to say what is
    missing); UnknownReference when nothing answers."""
    if ref.model_id is not None:
        row = read(_BY_ID, (ref.model_id,)) if in_range(ref.model_id) else None
        if row is None:
            raise UnknownReference(f"model {ref.model_id} not found")
        return ResolvedModel(model_id=row[0]), (row[2], row[3], row[4])
    assert ref.name is not None
    if ref.alias is not None:
        row = read(_BY_ALIAS, (ref.name, ref.alias))
    elif ref.version is not None:
        row = read(_BY_VERSION, (ref.name, ref.version)) if in_range(ref.version) else None
    else:  # a bare name: the served version
        row = read(_SERVING, (SERVING_ALIAS, ref.name))
    if row is None:
        raise UnknownReference(_missing(read, ref))
    alias = ref.alias
    if alias is None and ref.version is None and row[13] is not None:
        alias = SERVING_ALIAS  # (the alias chose it)
    rule = row[5] if alias is not None else None
    canary = _canary(row) if alias is not None else None
    resolved = ResolvedModel(model_id=row[0], name=ref.name, version=row[1], alias=alias,
                             rule=rule, canary=canary, arm="primary" if canary else None)
    return resolved, (row[2], row[3], row[4])


def _canary(row: tuple[Any, ...]) -> Canary | None:
    """The alias's canary from its read's last columns (``_CANARY_COLUMNS``), or None."""
    if row[6] is None or row[9] is None:
        return None
    return Canary(version=row[6], percent=float(row[7]), rule=row[8], model_id=row[9],
                  stamp=(row[10], row[11], row[12]))


def _missing(read: Reader, ref: Reference) -> str:
    """What of ``ref`` does not exist, in words."""
    name = ref.name
    if read(_MODEL_EXISTS, (name,)) is None:
        return f"registered model {name!r} not found"
    if ref.alias is not None:
        return f"registered model {name!r} has no alias {ref.alias!r}"
    if ref.version is not None:
        return f"registered model {name!r} has no version {ref.version}"
    return f"registered model {name!r} has no versions"


def runtime_reader(runtime: Runtime) -> Reader:
    """Reads on a pooled connection outside any session (``fetch_one``): the predict path."""
    return runtime.fetch_one


def session_reader(session: Session) -> Reader:
    """Reads in ``session``'s transaction."""

    def read(sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        connection = session.connection()
        statement = placeholders(connection.engine, sql)
        row = connection.exec_driver_sql(statement, params).first()
        return None if row is None else tuple(row)

    return read


def resolve(session: Session, ref: str) -> ResolvedModel:
    """The stored model ``ref`` names (``credit@production``, ``credit/3``, ``credit`` — the
    served version, see ``lookup`` — or a decimal model id ``42``); UnknownReference
    (InvalidReference for a malformed one) naming what was not found."""
    return lookup(session_reader(session), parse(ref))[0]


def resolve_serving(session: Session, name: str, version: int | None = None) -> ResolvedModel:
    """The version of registered model ``name`` to serve: ``version`` when given, else the
    version its ``production`` alias points at when set, else its newest version
    (``alias`` is ``"production"`` in the answer when the alias chose it)."""
    if not is_name(name):
        raise InvalidReference(f"{name[:120]!r} is not a registered model's name")
    read = session_reader(session)
    if version is not None:
        return lookup(read, Reference(f"{name}/{version}", name=name, version=version))[0]
    return lookup(read, Reference(name, name=name))[0]


def resolve_path(session: Session, name: str, version: str | None) -> ResolvedModel:
    """The model ``/v2/models/{name}[/versions/{version}]`` names: ``{name}`` a reference
    (a bare name as everywhere, ``name@alias`` or a stored model's id), ``{version}`` a version
    number of a registered name; UnknownReference if none."""
    if version is not None:
        if not (version.isascii() and version.isdigit() and len(version) <= 12):
            raise UnknownReference(f"model version {version[:40]!r} is not a version number")
        if name.isdigit():
            raise UnknownReference(
                f"model {name} is a stored model's id; it has no versions (use a registered name)"
            )
        return resolve_serving(session, name, int(version))
    return resolve(session, name)


def resolve_request(
    runtime: Runtime, text: str, loc: list[str | int], seconds: float = 0.0
) -> tuple[ResolvedModel, Stamp]:
    """The model a request's reference ``text`` names and its stamp: read now (outside any
    session), unless a read of it is younger than ``seconds`` (app.core.recheck). A malformed
    reference is a 422 naming ``loc``, an unknown one a 404 naming what is missing."""
    memo = recalled(runtime, text, seconds)
    if memo is not None:
        return memo
    checked_at = recheck.now()
    try:
        resolved, stamp = lookup(runtime_reader(runtime), parse(text))
    except InvalidReference as exc:
        raise invalid(loc, str(exc)) from None
    except UnknownReference as exc:
        raise missing(str(exc)) from None
    remember(runtime, text, resolved, stamp, checked_at)
    return resolved, stamp


# --- remembered resolutions (see the module's docstring) ------------------------------------

# Most references remembered per database; beyond it the memory starts again empty.
REMEMBERED_REFERENCES = 4096
# reference text -> (the model, its stamp, recheck.now() before the read)
Memory = dict[str, tuple[ResolvedModel, Stamp, float]]
#: The remembered resolutions of a runtime's database (app.core.runtime).
REFERENCE_MEMORY: Part[Memory] = Part("remembered registry references", lambda _runtime: {})


def remember(
    runtime: Runtime, text: str, resolved: ResolvedModel, stamp: Stamp, checked_at: float
) -> None:
    """Keep what ``text`` resolved to in a read that began at ``checked_at``."""
    memory = runtime.get(REFERENCE_MEMORY)
    if len(memory) >= REMEMBERED_REFERENCES and text not in memory:
        memory.clear()
    memory[text] = (resolved, stamp, checked_at)


def recalled(runtime: Runtime, text: str, seconds: float) -> tuple[ResolvedModel, Stamp] | None:
    """What ``text`` resolved to when that read is younger than ``seconds``; else None. No
    I/O."""
    entry = runtime.get(REFERENCE_MEMORY).get(text)
    if entry is None or not recheck.fresh(entry[2], seconds):
        return None
    return entry[0], entry[1]


def recalled_at(runtime: Runtime, text: str) -> float | None:
    """When the read behind ``text``'s remembered resolution began (recheck.now()), or None."""
    entry = runtime.get(REFERENCE_MEMORY).get(text)
    return None if entry is None else entry[2]


def forget(session_or_runtime: Session | Runtime) -> None:
    """Forget every remembered resolution of the database (a version or alias changed). A
    session no runtime made (a command's) has none to forget: other runtimes see the change
    within their recheck window, as other processes do."""
    runtime = (
        session_runtime(session_or_runtime)
        if isinstance(session_or_runtime, Session)
        else session_or_runtime
    )
    if runtime is not None:
        runtime.get(REFERENCE_MEMORY).clear()
