"""Registry data functions: registered models, versions, aliases and the aliases' history.

Writes that change a registered model's versions or aliases first lock its row (``SELECT …
FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises every write), so
concurrent moves of one alias queue up: the last one wins and each history entry's
``from_version`` is the version the alias really left. Route-level functions commit; those
named ``add_*`` only flush, for callers that commit with other rows (the train job's
``register_as``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, insert, select
from sqlalchemy import delete as sql_delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.ids import in_range
from app.core.orm import utcnow
from app.core.pagination import PageParams, paginate
from app.core.problems import conflict, invalid, missing, unknown
from app.models import service as models
from app.models.decisions import carried_rule, read_oof
from app.models.loading import rebuild
from app.models.orm import Model
from app.registry import references
from app.registry.orm import (
    AliasCanary,
    AliasMove,
    AliasMoveCanary,
    AliasMoveReason,
    AliasMoveRule,
    AliasRule,
    ModelAlias,
    ModelVersion,
    RegisteredModel,
    VersionLineage,
)
from app.registry.references import is_name
from app.webhooks import service as webhooks

#: An alias's canary: (its version, the percentage of the alias's requests it answers).
CanarySpec = tuple[int, float]
_CANARY_LOC: list[str | int] = ["body", "canary"]


def check_name(name: str, loc: list[str | int], what: str = "name") -> None:
    if not is_name(name):
        raise invalid(
            loc,
            f"{what} must be 1-100 letters, digits, '.', '_' or '-', start with a letter or "
            "digit, and not be all digits",
        )


# --- registered models --------------------------------------------------------------------------


def get(session: Session, name: str, *, lock: bool = False) -> RegisteredModel | None:
    stmt = select(RegisteredModel).where(RegisteredModel.name == name)
    if lock:
        stmt = stmt.with_for_update()
    return session.scalars(stmt).first()


def get_or_raise(session: Session, name: str, *, lock: bool = False) -> RegisteredModel:
    """The registered model; 404 naming it."""
    found = get(session, name, lock=lock) if is_name(name) else None
    if found is None:
        raise missing(f"registered model {name!r} not found")
    return found


def _insert_if_absent(session: Session, name: str, description: str, tags: dict) -> bool:
    """Insert the registered model unless one of that name exists (committed or being
    committed by another transaction, which this one waits for): True when inserted."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    now = utcnow()
    stmt = insert(RegisteredModel.__table__).values(
        name=name,
        description=description,
        tags=tags,
        last_version=0,
        created_at=now,
        updated_at=now,
    )
    stmt = stmt.on_conflict_do_nothing(index_elements=["name"]).returning(RegisteredModel.id)
    return session.execute(stmt).first() is not None


def create(
    session: Session, name: str, description: str = "", tags: dict[str, str] | None = None
) -> RegisteredModel:
    """A new registered model (committed); 409 when the name is taken."""
    check_name(name, ["body", "name"])
    if not _insert_if_absent(session, name, description, dict(tags or {})):
        raise conflict(f"registered model {name!r} already exists")
    session.commit()
    return get_or_raise(session, name)


def list_page(session: Session, page: PageParams) -> tuple[list[RegisteredModel], str | None]:
    return paginate(session, select(RegisteredModel), RegisteredModel.id, page)


def update(
    session: Session,
    name: str,
    *,
    description: str | None = None,
    tags: dict[str, str] | None = None,
) -> RegisteredModel:
    """Replace the description and/or the tags (those given); committed."""
    registered = get_or_raise(session, name, lock=True)
    if description is not None:
        registered.description = description
    if tags is not None:
        registered.tags = dict(tags)
    registered.updated_at = utcnow()
    session.commit()
    return registered


def delete(session: Session, name: str) -> None:
    """Delete the registered model, its versions and history (not the stored models); 409
    while an alias points at one of its versions."""
    registered = get_or_raise(session, name, lock=True)
    aliases = aliases_of(session, registered)
    if aliases:
        listed = ", ".join(f"{a!r} -> version {v}" for a, v in aliases.items())
        raise conflict(f"registered model {name!r} still has aliases ({listed}); remove them first")
    session.delete(registered)
    session.commit()
    references.forget(session)


# --- versions -----------------------------------------------------------------------------------


def add_version(
    session: Session, name: str, model_id: int, *, create_missing: bool = False,
    lineage: dict[str, Any] | None = None,
) -> ModelVersion:
    """Make stored model ``model_id`` the next version of ``name`` (flushed, not committed).
    ``create_missing``: create the registered model on first use (the train job's
    ``register_as``); otherwise 404 when it does not exist. ``lineage``: a retrained
    version's (app.loop: parent, rows added, window, the warm start's saving)."""
    if create_missing and get(session, name) is None:
        _insert_if_absent(session, name, "", {})
    registered = get_or_raise(session, name, lock=True)
    registered.last_version += 1
    registered.updated_at = utcnow()
    version = ModelVersion(
        registered_model_id=registered.id, version=registered.last_version, model_id=model_id,
    )
    session.add(version)
    session.flush()
    if lineage is not None:
        session.add(VersionLineage(registered_model_id=registered.id, version=version.version,
                                   lineage=lineage))
    # the hooks that take it: delivered once the caller commits (an outbox row, same transaction)
    webhooks.enqueue(session, "version_registered", {
        "registered_model": name, "version": version.version, "model_id": model_id})
    return version


def register(
    session: Session, name: str, model_id: int, *, create_missing: bool = False
) -> ModelVersion:
    """POST /registered-models/{name}/versions: the next version, committed; 404 for an
    unknown registered model (``create_missing``: created instead, as by ``msvmav models
    register``), 404 naming ``model_id`` when there is no such stored model."""
    if create_missing:
        check_name(name, ["path", "name"])
    else:
        get_or_raise(session, name)
    if session.get(Model, model_id) is None:
        raise unknown(["body", "model_id"], f"model {model_id} not found")
    try:
        version = add_version(session, name, model_id, create_missing=create_missing)
        session.commit()
        references.forget(session)  # ("name" alone resolves to the newest version)
    except IntegrityError:  # the model was deleted meanwhile
        session.rollback()
        raise unknown(["body", "model_id"], f"model {model_id} not found") from None
    return version


def lineage_of(session: Session, version: ModelVersion) -> dict[str, Any] | None:
    """A retrained version's lineage (None: the version was registered otherwise)."""
    return session.scalar(select(VersionLineage.lineage).where(
        VersionLineage.registered_model_id == version.registered_model_id,
        VersionLineage.version == version.version))


def get_version(session: Session, registered: RegisteredModel, version: int) -> ModelVersion:
    found = session.get(ModelVersion, (registered.id, version)) if in_range(version) else None
    if found is None:
        raise missing(f"registered model {registered.name!r} has no version {version}")
    return found


def delete_version(session: Session, name: str, version: int) -> None:
    """Remove the version (its stored model stays); 409 while an alias points at it."""
    registered = get_or_raise(session, name, lock=True)
    row = get_version(session, registered, version)
    pointing = sorted(a for a, v in aliases_of(session, registered).items() if v == version)
    pointing += sorted(f"{a} (its canary)" for a, c in canaries_of(session, registered).items()
                       if c[0] == version)
    if pointing:
        raise conflict(
            f"version {version} of registered model {name!r} is the target of alias "
            f"{', '.join(repr(a) for a in pointing)}; move or remove the alias first"
        )
    session.delete(row)
    session.commit()
    references.forget(session)


def versions_of(session: Session, registered: RegisteredModel) -> list[dict[str, Any]]:
    """Its versions, newest first, with their stored models' algorithm and hold-out accuracy."""
    rows = session.execute(
        select(ModelVersion, Model.algorithm, Model.holdout_accuracy, VersionLineage.lineage)
        .join(Model, Model.id == ModelVersion.model_id)
        .outerjoin(VersionLineage, and_(
            VersionLineage.registered_model_id == ModelVersion.registered_model_id,
            VersionLineage.version == ModelVersion.version))
        .where(ModelVersion.registered_model_id == registered.id)
        .order_by(ModelVersion.version.desc())
    ).all()
    return [
        {
            "version": v.version,
            "model_id": v.model_id,
            "algorithm": algorithm,
            "holdout_accuracy": accuracy,
            "created_at": v.created_at,
            "lineage": lineage,
        }
        for v, algorithm, accuracy, lineage in rows
    ]


# --- aliases ------------------------------------------------------------------------------------


def aliases_of(session: Session, registered: RegisteredModel) -> dict[str, int]:
    rows = session.execute(
        select(ModelAlias.alias, ModelAlias.version)
        .where(ModelAlias.registered_model_id == registered.id)
        .order_by(ModelAlias.alias)
    )
    return {alias: version for alias, version in rows}


def _move(
    session: Session,
    registered: RegisteredModel,
    alias: str,
    to_version: int | None,
    *,
    action: str,
    actor: str | None,
    rule: str | None = None,
    canary: CanarySpec | None = None,
    why: tuple[str | None, dict[str, Any] | None] = (None, None),
) -> int | None:
    """Point ``alias`` at ``to_version`` (None: remove it) with its own decision ``rule``
    (JSON text, None: its version's) and its ``canary`` (None: none), and append the move to
    the history, under the registered model's lock (the caller took it); ``why``: the move's
    reason and evidence. Returns the version it left."""
    row = session.get(ModelAlias, (registered.id, alias))
    before = row.version if row is not None else None
    before_rule = alias_rule(session, registered, alias)
    before_canary = canaries_of(session, registered).get(alias)
    canary = None if to_version is None else canary
    if before == to_version and (
        to_version is None or (before_rule == rule and before_canary == canary)
    ):
        return before  # no move, no history entry
    now = utcnow()
    if to_version is None:
        session.delete(row)
    elif row is None:
        session.add(
            ModelAlias(
                registered_model_id=registered.id, alias=alias, version=to_version, updated_at=now
            )
        )
    else:
        row.version, row.updated_at = to_version, now
    move = AliasMove(
        registered_model_id=registered.id,
        alias=alias,
        action=action,
        from_version=before,
        to_version=to_version,
        actor=actor,
        moved_at=now,
    )
    session.add(move)
    if why != (None, None):
        session.flush()
        session.add(AliasMoveReason(move_id=move.id, reason=why[0], evidence=why[1]))
    _set_rules(session, registered, alias, before_rule, None if to_version is None else rule)
    _set_canary(session, registered, alias, move, (before_canary, canary),
                None if to_version is None else rule)
    webhooks.enqueue(session, "alias_moved", {
        "registered_model": registered.name, "alias": alias, "action": action,
        "from_version": before, "to_version": to_version, "actor": actor,
        "moved_at": now.isoformat(), "reason": why[0], "canary": _canary_json(canary)})
    return before


def set_alias(
    session: Session, name: str, alias: str, version: int, actor: str | None,
    why: tuple[str | None, dict[str, Any] | None] = (None, None),
    canary: CanarySpec | None = None,
) -> tuple[int, int | None]:
    """Point ``alias`` at ``version`` (creating the alias) with ``canary`` (None: none, so a
    canary it had ends: PUT replaces the alias); committed. ``why``: the move's reason and
    evidence (a retraining policy's). Returns (version, the version it pointed at before)."""
    check_name(alias, ["path", "alias"], "an alias")
    registered = get_or_raise(session, name, lock=True)
    found = session.get(ModelVersion, (registered.id, version))
    if found is None:
        raise unknown(["body", "version"], f"registered model {name!r} has no version {version}")
    _check_canary(session, registered, version, canary)
    row = session.get(ModelAlias, (registered.id, alias))
    rule = alias_rule(session, registered, alias)
    if row is not None and row.version != version:  # the alias's rule, refitted for the version
        rule = _carried(session, found.model_id, rule)
    action = "set" if row is None or row.version != version else "canary"
    before = _move(session, registered, alias, version, action=action, actor=actor, rule=rule,
                   canary=canary, why=why)
    session.commit()
    references.forget(session)
    return version, before


def _carried(session: Session, model_id: int, text: str | None) -> str | None:
    """The alias's rule refitted for the version it moves to (app.models.decisions)."""
    if text is None:
        return None
    estimator = rebuild(session, models.get_or_raise(session, model_id)).estimator
    return carried_rule(estimator, read_oof(session, model_id), text)


def alias_rule(session: Session, registered: RegisteredModel, alias: str) -> str | None:
    """The alias's own decision rule (JSON text), None without one."""
    return session.scalar(select(AliasRule.rule).where(
        AliasRule.registered_model_id == registered.id, AliasRule.alias == alias))


def _set_rules(session: Session, registered: RegisteredModel, alias: str,
               before: str | None, after: str | None) -> None:
    """The alias's own rule after a move and, when either is set, the move's record of both
    (Core statements: the row goes with its alias, which the database may have removed)."""
    owned = (AliasRule.registered_model_id == registered.id, AliasRule.alias == alias)
    session.execute(sql_delete(AliasRule).where(*owned))  # (flushes the move first)
    if after is not None:
        session.execute(insert(AliasRule).values(
            registered_model_id=registered.id, alias=alias, rule=after))
    if before is not None or after is not None:
        move_id = session.scalar(
            select(AliasMove.id).where(AliasMove.registered_model_id == registered.id,
                                       AliasMove.alias == alias)
            .order_by(AliasMove.id.desc()).limit(1))
        session.add(AliasMoveRule(move_id=move_id, from_rule=before, to_rule=after))


def set_alias_rule(
    session: Session, name: str, alias: str, rule: str | None, actor: str | None
) -> None:
    """Give ``alias`` its own decision rule (JSON text; None: its version's again), recorded
    in the history as a move of the rule (``action`` "rule"), so a rollback restores the rule
    it had. Committed."""
    registered = get_or_raise(session, name, lock=True)
    row = session.get(ModelAlias, (registered.id, alias))
    if row is None:
        raise missing(f"registered model {name!r} has no alias {alias!r}")
    _move(session, registered, alias, row.version, action="rule", actor=actor, rule=rule,
          canary=canaries_of(session, registered).get(alias))
    session.commit()
    references.forget(session)


def copy_alias_rule(
    session: Session, name: str, source: str, target: str, actor: str | None
) -> str | None:
    """Give alias ``target`` alias ``source``'s own decision rule, refitted for ``target``'s
    version as a move carries it (none when ``source`` has none; recorded as ``set_alias_rule``
    records). Committed. Returns the rule given (JSON text)."""
    registered = get_or_raise(session, name)
    text = alias_rule(session, registered, source)
    row = session.get(ModelAlias, (registered.id, target))
    if text is None or row is None:
        return None
    carried = _carried(session, session.get(ModelVersion, (registered.id, row.version)).model_id,
                       text)
    set_alias_rule(session, name, target, carried, actor)
    return carried


# --- canaries (issue 48: app.registry.canary routes the requests) -----------------------------


def canaries_of(session: Session, registered: RegisteredModel) -> dict[str, CanarySpec]:
    """Alias -> its canary (version, percent)."""
    rows = session.execute(
        select(AliasCanary.alias, AliasCanary.version, AliasCanary.percent)
        .where(AliasCanary.registered_model_id == registered.id)
    )
    return {alias: (version, float(percent)) for alias, version, percent in rows}


def _check_canary(
    session: Session, registered: RegisteredModel, version: int, canary: CanarySpec | None
) -> None:
    """422 naming ``canary.version`` or ``canary.percent`` unless ``canary`` is a version of
    the registered model other than the alias's ``version``, at 0 < percent < 100."""
    if canary is None:
        return
    canary_version, percent = canary
    if not (0.0 < percent < 100.0):  # (NaN fails too)
        raise invalid([*_CANARY_LOC, "percent"], "percent must be above 0 and below 100 (0: "
                      "end the canary with canary null; 100: point the alias at the version)")
    if canary_version == version:
        raise invalid([*_CANARY_LOC, "version"], f"the canary's version {canary_version} is "
                      "the alias's own version: a canary is another version")
    if not in_range(canary_version) or session.get(
            ModelVersion, (registered.id, canary_version)) is None:
        raise unknown([*_CANARY_LOC, "version"],
                      f"registered model {registered.name!r} has no version {canary_version}")


def _set_canary(
    session: Session, registered: RegisteredModel, alias: str, move: AliasMove,
    change: tuple[CanarySpec | None, CanarySpec | None], rule: str | None,
) -> None:
    """The alias's canary after ``move`` (with the alias's ``rule`` carried to its version)
    and, when it had or has one, the move's record of both (Core statements, as for rules)."""
    before, after = change
    owned = (AliasCanary.registered_model_id == registered.id, AliasCanary.alias == alias)
    session.execute(sql_delete(AliasCanary).where(*owned))  # (flushes the move first)
    if after is not None:
        model_id = session.get(ModelVersion, (registered.id, after[0])).model_id
        session.execute(insert(AliasCanary).values(
            registered_model_id=registered.id, alias=alias, version=after[0], percent=after[1],
            rule=_carried(session, model_id, rule)))
    if before is not None or after is not None:
        session.add(AliasMoveCanary(
            move_id=move.id, from_version=before[0] if before else None,
            from_percent=before[1] if before else None, to_version=after[0] if after else None,
            to_percent=after[1] if after else None))


def _canary_json(canary: CanarySpec | None) -> dict[str, Any] | None:
    return None if canary is None else {"version": canary[0], "percent": canary[1]}


def _restorable_canary(
    session: Session, registered: RegisteredModel, move: AliasMove
) -> CanarySpec | None:
    """The canary the alias had before ``move`` (a rollback restores it); 409 when its
    version was deleted since."""
    was = move.from_canary
    if was is None:
        return None
    if session.get(ModelVersion, (registered.id, was["version"])) is None:
        raise conflict(f"alias {move.alias!r} of registered model {registered.name!r} had "
                       f"version {was['version']} as its canary before that move, but that "
                       "version was deleted")
    return int(was["version"]), float(was["percent"])


def set_canary(
    session: Session, name: str, alias: str, canary: CanarySpec | None, actor: str | None,
    why: tuple[str | None, dict[str, Any] | None] = (None, None),
) -> int:
    """Start, change (``canary``) or end (None) the alias's canary, keeping its version;
    recorded in the history (``action`` "canary"; ``why``: its reason and evidence, as for
    ``set_alias``). Committed. Returns the alias's version."""
    registered = get_or_raise(session, name, lock=True)
    row = session.get(ModelAlias, (registered.id, alias))
    if row is None:
        raise missing(f"registered model {name!r} has no alias {alias!r}")
    _check_canary(session, registered, row.version, canary)
    _move(session, registered, alias, row.version, action="canary", actor=actor,
          rule=alias_rule(session, registered, alias), canary=canary, why=why)
    session.commit()
    references.forget(session)
    return row.version


def delete_alias(session: Session, name: str, alias: str, actor: str | None) -> None:
    registered = get_or_raise(session, name, lock=True)
    if session.get(ModelAlias, (registered.id, alias)) is None:
        raise missing(f"registered model {name!r} has no alias {alias!r}")
    _move(session, registered, alias, None, action="delete", actor=actor)
    session.commit()
    references.forget(session)


def _standing_move(session: Session, registered: RegisteredModel, alias: str) -> AliasMove | None:
    """The move of ``alias`` a rollback undoes: its newest move not undone yet. The history is
    a stack: each rollback undid the newest move still standing before it, so walking back
    from the newest entry, every rollback cancels one standing move further back (1 -> 2 -> 3,
    a rollback -> 2, another -> 1, not forward to 3 again). None: every move is undone, or the
    alias never moved."""
    moves = session.execute(
        select(AliasMove.id, AliasMove.action)
        .where(AliasMove.registered_model_id == registered.id, AliasMove.alias == alias)
        .order_by(AliasMove.id.desc())
        .execution_options(yield_per=500)
    )
    undone = 0
    for move_id, action in moves:
        if action == "rollback":
            undone += 1
        elif undone:
            undone -= 1
        else:
            moves.close()
            return session.get(AliasMove, move_id)
    return None


def rollback_alias(
    session: Session, name: str, alias: str, actor: str | None,
    why: tuple[str | None, dict[str, Any] | None] = (None, None),
) -> tuple[int, int | None]:
    """Undo the alias's newest move still standing (``_standing_move``): the alias goes back
    to the version it pointed at before that move (a removed alias comes back), recorded as a
    move of its own; so successive rollbacks walk back through the history. Committed. 409
    when there is nothing to go back to (the standing move created the alias, every move is
    undone, or it never existed) or that version was deleted since. Returns (version, version
    left)."""
    registered = get_or_raise(session, name, lock=True)
    standing = _standing_move(session, registered, alias)
    if standing is None or standing.from_version is None:
        never = standing is None and _never_set(session, registered, alias)
        raise conflict(
            f"alias {alias!r} of registered model {name!r} has no earlier version to go back to"
            + (" (it was never set)" if never else "")
        )
    target = standing.from_version
    if session.get(ModelVersion, (registered.id, target)) is None:
        moved = "removal" if standing.to_version is None else f"move to {standing.to_version}"
        raise conflict(
            f"alias {alias!r} of registered model {name!r} pointed at version {target} before "
            f"its {moved}, but that version was deleted"
        )
    canary = _restorable_canary(session, registered, standing)
    before = _move(session, registered, alias, target, action="rollback", actor=actor,
                   rule=standing.from_rule, canary=canary, why=why)
    session.commit()
    references.forget(session)
    return target, before


def _never_set(session: Session, registered: RegisteredModel, alias: str) -> bool:
    found = session.scalars(
        select(AliasMove.id)
        .where(AliasMove.registered_model_id == registered.id, AliasMove.alias == alias)
        .limit(1)
    ).first()
    return found is None


def history_page(
    session: Session, name: str, page: PageParams
) -> tuple[list[AliasMove], str | None]:
    """Every alias move of the registered model, newest first."""
    registered = get_or_raise(session, name)
    stmt = select(AliasMove).where(AliasMove.registered_model_id == registered.id)
    return paginate(session, stmt, AliasMove.id, page)


# --- views --------------------------------------------------------------------------------------


def _canary_models(session: Session, owners: list[int]) -> dict[tuple[int, int], int]:
    """(registered model id, version) -> stored model id of each canary version of ``owners``."""
    if not owners:
        return {}
    rows = session.execute(
        select(ModelVersion.registered_model_id, ModelVersion.version, ModelVersion.model_id)
        .join(AliasCanary, (AliasCanary.registered_model_id == ModelVersion.registered_model_id)
              & (AliasCanary.version == ModelVersion.version))
        .where(ModelVersion.registered_model_id.in_(owners)))
    return {(owner, version): model_id for owner, version, model_id in rows}


def summary(
    registered: RegisteredModel, aliases: dict[str, int],
    canaries: dict[str, CanarySpec] | None = None,
    canary_models: dict[tuple[int, int], int] | None = None,
) -> dict[str, Any]:
    """The registered model's summary; each canary with its version's stored model id (from
    ``canary_models``, ``_canary_models``' answer)."""
    found = canary_models or {}
    return {
        "name": registered.name,
        "description": registered.description,
        "tags": registered.tags,
        "latest_version": registered.last_version,
        "aliases": aliases,
        "canaries": {a: {**_canary_json(c), "model_id": found.get((registered.id, c[0]))}
                     for a, c in (canaries or {}).items()},
        "created_at": registered.created_at,
        "updated_at": registered.updated_at,
    }


def detail(session: Session, registered: RegisteredModel) -> dict[str, Any]:
    """The registered model with its aliases, their canaries and its versions (newest
    first)."""
    return {
        **summary(registered, aliases_of(session, registered),
                  canaries_of(session, registered), _canary_models(session, [registered.id])),
        "versions": versions_of(session, registered),
    }


def summaries(session: Session, rows: list[RegisteredModel]) -> list[dict[str, Any]]:
    """Summaries of a page of registered models, their aliases read in one query."""
    aliases: dict[int, dict[str, int]] = {r.id: {} for r in rows}
    if rows:
        found = session.execute(
            select(ModelAlias.registered_model_id, ModelAlias.alias, ModelAlias.version)
            .where(ModelAlias.registered_model_id.in_(list(aliases)))
            .order_by(ModelAlias.alias)
        )
        for owner, alias, version in found:
            aliases[owner][alias] = version
    canaries: dict[int, dict[str, CanarySpec]] = {r.id: {} for r in rows}
    if rows:
        for owner, alias, version, percent in session.execute(
            select(AliasCanary.registered_model_id, AliasCanary.alias, AliasCanary.version,
                   AliasCanary.percent).where(AliasCanary.registered_model_id.in_(list(aliases)))
        ):
            canaries[owner][alias] = (version, float(percent))
    models = _canary_models(session, [r.id for r in rows])
    return [summary(r, aliases[r.id], canaries[r.id], models) for r in rows]


def alias_view(
    session: Session, name: str, alias: str, version: int, before: int | None
) -> dict[str, Any]:
    registered = get_or_raise(session, name)
    canary = canaries_of(session, registered).get(alias)
    return {
        "name": name,
        "alias": alias,
        "version": version,
        "model_id": get_version(session, registered, version).model_id,
        "previous_version": before,
        "canary": None if canary is None else {
            "version": canary[0], "percent": canary[1],
            "model_id": get_version(session, registered, canary[0]).model_id},
    }
