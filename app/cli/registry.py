"""``msvmav models register|alias|rollback|history``: the registry's service functions on the
database directly (migrated first on SQLite, as ``serve`` does). Alias moves made here are
recorded with the actor ``cli:<user>``."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from app.core.config import Settings


def add_parser(sub: Any) -> None:
    """The ``models`` sub-command and its own sub-commands."""
    models = sub.add_parser("models", help="registered models: register, alias, rollback, history")
    models.set_defaults(func=cmd_models)
    models_sub = models.add_subparsers(dest="models_command", required=True)
    register = models_sub.add_parser(
        "register",
        help="make a stored model the next version of a registered model (created on first use)",
    )
    register.add_argument("name", help="registered model")
    register.add_argument("model_id", type=int, help="stored model id (GET /models)")
    alias = models_sub.add_parser("alias", help="point an alias at a version (or --delete it)")
    alias.add_argument("name", help="registered model")
    alias.add_argument("alias", help="alias, e.g. production")
    alias.add_argument("version", type=int, nargs="?", help="version (omit with --delete)")
    alias.add_argument("--delete", action="store_true", help="remove the alias")
    rollback = models_sub.add_parser(
        "rollback", help="undo an alias's newest move not undone yet (again: the one before)"
    )
    rollback.add_argument("name", help="registered model")
    rollback.add_argument("alias", help="alias, e.g. production")
    history = models_sub.add_parser("history", help="every alias move, newest first")
    history.add_argument("name", help="registered model")


def cmd_models(settings: Settings, args: argparse.Namespace) -> int:
    from app.core.db import is_sqlite, make_engine, make_session_factory, upgrade_to_head
    from app.core.problems import Problem

    if is_sqlite(settings.database_url):
        upgrade_to_head(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            print(_run(session, args))
    except Problem as exc:
        print(f"msvmav models {args.models_command}: {exc.detail}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    return 0


def _run(session: Any, args: argparse.Namespace) -> str:
    """What the sub-command prints (a Problem for the user's mistakes)."""
    from app.core.problems import invalid
    from app.registry import service as registry

    actor = f"cli:{getpass.getuser()}"
    if args.models_command == "register":
        version = registry.register(session, args.name, args.model_id, create_missing=True)
        return f"{args.name} version {version.version} = model {version.model_id}"
    if args.models_command == "alias" and args.delete:
        registry.delete_alias(session, args.name, args.alias, actor)
        return f"{args.name}@{args.alias} removed"
    if args.models_command == "alias":
        if args.version is None:
            raise invalid(["version"], "give the version the alias points at (or --delete)")
        version, before = registry.set_alias(session, args.name, args.alias, args.version, actor)
        return f"{args.name}@{args.alias}: {_shown(before)} -> {version}"
    if args.models_command == "rollback":
        version, before = registry.rollback_alias(session, args.name, args.alias, actor)
        return f"{args.name}@{args.alias}: {_shown(before)} -> {version}"
    return _history(session, registry, args.name)


def _history(session: Any, registry: Any, name: str) -> str:
    from app.core.pagination import MAX_LIMIT, PageParams

    lines = ["moved_at\talias\taction\tfrom\tto\tactor"]
    page = PageParams(limit=MAX_LIMIT, after_id=None)
    while True:
        moves, cursor = registry.history_page(session, name, page)
        for m in moves:
            when = m.moved_at.isoformat(timespec="seconds")
            lines.append(
                f"{when}\t{m.alias}\t{m.action}\t{_shown(m.from_version)}\t"
                f"{_shown(m.to_version)}\t{m.actor or '-'}"
            )
        if cursor is None:
            return "\n".join(lines)
        page = PageParams(limit=MAX_LIMIT, after_id=moves[-1].id)


def _shown(version: int | None) -> str:
    return "-" if version is None else str(version)
