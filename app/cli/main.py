"""The ``msvmav`` command: ``serve``, ``worker``, ``migrate``, ``keys``, ``models``,
``experiment``."""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import signal
import sys
from typing import Any

from app.cli import registry
from app.cli.errors import CommandParser, run_reporting_errors
from app.core.config import Settings
from app.core.db import is_sqlite, make_engine, schema_refusal, upgrade_to_head
from app.core.logs import configure_logging

# The API process's thread switch interval (seconds; CPython's default is 0.005). The event loop
# shares the GIL with the prediction log's writer and the background checks: while one of them
# runs Python code (the writer turns half a second of one-row requests into a chunk, ~5 ms), a
# request waits for the GIL until the interval forces it over.
SWITCH_INTERVAL = 0.001


def cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    upgrade_to_head(settings.database_url)
    return 0


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    from app.jobs.worker import check_command, run_worker

    if args.check:
        return check_command(settings, args.max_age)
    run_worker(settings)
    return 0


def _first_start_key(settings: Settings) -> int:
    """``keys first-start`` (the image's entrypoint): migrate the database, then, if it holds no
    API key, create an admin key and print it with its notice; print nothing otherwise. One
    process for what took three (``migrate``, ``keys list``, ``keys create``), each importing
    the service anew: the entrypoint's first start waits on one import instead of three."""
    from app.auth import service
    from app.auth.keys import Scope
    from app.core.db import make_session_factory

    upgrade_to_head(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            if service.any_key_exists(session):
                return 0
            _row, secret = service.create(session, "first-start", Scope.admin)
    finally:
        engine.dispose()
    print("msvmav: no MSVMAV_ADMIN_KEY and no API key in the database: created one (shown only "
          "here)")
    print(f"msvmav: admin key: {secret}")
    return 0


def cmd_keys(settings: Settings, args: argparse.Namespace) -> int:
    """``keys create|list|revoke``: on the database directly (migrated first on SQLite, as
    ``serve`` does). ``create`` prints the new key alone on stdout: the only time it is shown."""
    from app.auth import service
    from app.auth.keys import Scope
    from app.core.db import make_engine, make_session_factory
    from app.core.pagination import MAX_LIMIT, PageParams
    from app.core.problems import Problem

    if args.keys_command == "first-start":
        return _first_start_key(settings)
    if is_sqlite(settings.database_url):
        upgrade_to_head(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            if args.keys_command == "create":
                _row, secret = service.create(session, args.name, Scope(args.scope))
                print(secret)
            elif args.keys_command == "revoke":
                try:
                    row = service.revoke(session, args.id)
                except Problem as exc:
                    print(f"msvmav keys revoke: {exc.detail}", file=sys.stderr)
                    return 1
                print(f"revoked key {row.id} ({row.name}, {row.prefix}...)", file=sys.stderr)
            else:
                page = PageParams(limit=MAX_LIMIT, after_id=None)
                print("id\tscope\tprefix\tname\tcreated_at\tlast_used_at\trevoked_at")
                while True:
                    rows, cursor = service.list_page(session, page)
                    for r in rows:
                        times = (r.created_at, r.last_used_at, r.revoked_at)
                        shown = "\t".join(
                            t.isoformat(timespec="seconds") if t else "-" for t in times
                        )
                        print(f"{r.id}\t{r.scope}\t{r.prefix}...\t{r.name}\t{shown}")
                    if cursor is None:
                        break
                    page = PageParams(limit=MAX_LIMIT, after_id=rows[-1].id)
    finally:
        engine.dispose()
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from app.auth.serving import ServeRefused, serve_settings
    from app.cli.supervisor import WorkerSupervisor
    from app.main import create_app

    migrate = args.migrate if args.migrate is not None else is_sqlite(settings.database_url)
    if migrate:
        upgrade_to_head(settings.database_url)
    if (refusal := _schema_refusal(settings)) is not None:
        print(f"msvmav serve: {refusal}", file=sys.stderr)
        return 2
    try:
        settings = serve_settings(settings, args.host)
    except ServeRefused as exc:
        print(f"msvmav serve: {exc}", file=sys.stderr)
        return 2

    # Training runs in other processes, never in the API's event loop or its threads: numpy
    # holds the GIL at times, and a crash in a fit must not take the API down. A worker that
    # dies is restarted, its job re-queued (app.cli.supervisor).
    workers = WorkerSupervisor(settings, args.workers, multiprocessing.get_context("spawn"))
    workers.start()
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, restores the previous handlers and then
    # re-raises the signal: with these handlers that ends in _Shutdown (exit 0) instead of the
    # process dying before it could stop its workers.
    previous = {sig: signal.signal(sig, _raise_shutdown) for sig in (signal.SIGTERM, signal.SIGINT)}
    app = create_app(settings)
    if args.workers:  # /readyz and /metrics see the embedded workers
        app.state.readiness_checks = [workers.health]
        app.state.metric_sources.append(workers.metric_lines)
    # Everything built so far (the app, NumPy, SciPy, scikit-learn, ...) lives as long as the
    # process: moved out of the cyclic collector's reach, a full collection no longer scans
    # it (it took 0.1-0.4 s on the development machine and was /predict's p99 latency).
    gc.collect()
    gc.freeze()
    try:
        _run_http(app, args.host, args.port, settings.header_timeout)
    except _Shutdown:
        pass
    finally:
        workers.stop()  # SIGTERM: each worker re-queues its job and exits
        # Not left behind in a process that goes on (a test, or forked children of it).
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _run_http(app: Any, host: str, port: int, header_timeout: float) -> None:
    """uvicorn with its h11 protocol plus a deadline for each request's head (408 after
    ``header_timeout`` seconds: app.core.header_timeout), the GIL handed over every
    SWITCH_INTERVAL seconds."""
    import uvicorn

    from app.core.header_timeout import protocol_with_header_timeout

    http = protocol_with_header_timeout(header_timeout)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        uvicorn.run(app, host=host, port=port, log_config=None, http=http)
    finally:
        sys.setswitchinterval(previous)


def _schema_refusal(settings: Settings) -> str | None:
    """Why the API must not start on this database (a schema older than the code's), if so."""
    engine = make_engine(settings.database_url)
    try:
        return schema_refusal(engine)
    finally:
        engine.dispose()


class _Shutdown(Exception):  # noqa: N818 - a signal, not an error
    pass


def _raise_shutdown(_sig: int, _frame: object) -> None:
    raise _Shutdown()


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="msvmav",
        description="Margin-distribution learning service (MSVMAv). Settings come from "
        "MSVMAV_* environment variables; see the README.",
    )
    parser.add_argument(
        "--database-url",
        help="overrides MSVMAV_DATABASE_URL (whose default is sqlite:///./msvmav.db)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_worker(sub)
    migrate = sub.add_parser("migrate", help="alembic upgrade head")
    migrate.set_defaults(func=cmd_migrate)
    _add_keys(sub)
    registry.add_parser(sub)
    # Listed for --help only: main() hands `experiment ...` to app.cli.experiment.main as is.
    sub.add_parser(
        "experiment",
        help="run the paper's protocol on a data file, no database "
        "(msvmav experiment --help for its options)",
        add_help=False,
    )
    return parser


def _add_serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the HTTP API with embedded worker(s)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes to start alongside the API (0 for API only)",
    )
    serve.add_argument(
        "--migrate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run migrations before starting (when not given: only on SQLite)",
    )
    _dask_option(serve, "the embedded workers run")
    serve.set_defaults(func=cmd_serve)


def _add_worker(sub: Any) -> None:
    worker = sub.add_parser("worker", help="run a worker process (for a shared database)")
    worker.add_argument(
        "--check",
        action="store_true",
        help="health check: exit 1 when this host's worker loop has not moved for --max-age "
        "seconds (its MSVMAV_WORKER_ALIVE_FILE is older), 0 otherwise",
    )
    worker.add_argument(
        "--max-age",
        type=float,
        help="seconds for --check (default MSVMAV_WORKER_ALIVE_MAX_AGE, 120)",
    )
    _dask_option(worker, "this worker runs")
    worker.set_defaults(func=cmd_worker)


def _add_keys(sub: Any) -> None:
    keys = sub.add_parser("keys", help="create, list or revoke API keys")
    keys.set_defaults(func=cmd_keys)
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it (shown only once)")
    create.add_argument("--scope", choices=["read", "write", "admin"], required=True)
    create.add_argument("--name", required=True, type=_key_name, help="what the key is for")
    keys_sub.add_parser("list", help="list keys (never their secrets)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key at once")
    revoke.add_argument("id", type=int, help="the key's id (see `msvmav keys list`)")
    keys_sub.add_parser(
        "first-start",
        help="migrate, then create and print an admin key if the database holds none "
        "(the container image's first start)",
    )


def _dask_option(parser: argparse.ArgumentParser, who: str) -> None:
    parser.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help=f"overrides MSVMAV_DASK_SCHEDULER: the searches and experiments {who} send their "
        "cells to this Dask scheduler (tcp://host:8786; pip install 'msvmav[dask]')",
    )


def _key_name(value: str) -> str:
    if not 1 <= len(value) <= 255:
        raise argparse.ArgumentTypeError("a key's name has 1 to 255 characters")
    return value


def cmd_experiment(argv: list[str]) -> int:
    """``msvmav experiment ...``: ``app.cli.experiment.main`` with the remaining arguments."""
    from app.cli.experiment import main as experiment_main

    return experiment_main(argv)


def _command_index(argv: list[str]) -> int | None:
    """Where the sub-command is in argv, after the global options (None if there is none)."""
    i = 0
    while i < len(argv):
        if argv[i] == "--database-url":
            i += 2
        elif argv[i].startswith("--database-url="):
            i += 1
        else:
            return None if argv[i].startswith("-") else i
    return None


def main(argv: list[str] | None = None) -> int:
    """The ``msvmav`` command; a user's mistake is one line on stderr (app.cli.errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_reporting_errors("msvmav", lambda: _dispatch(argv))


def _dispatch(argv: list[str]) -> int:
    command = _command_index(argv)
    if command is not None and argv[command] == "experiment":
        # the experiment needs no database: global options before it are accepted and unused
        return cmd_experiment(argv[command + 1 :])
    args = build_parser().parse_args(argv)
    overrides = {"database_url": args.database_url} if args.database_url else {}
    if getattr(args, "dask_scheduler", None):
        overrides["dask_scheduler"] = args.dask_scheduler
    settings = Settings(**overrides)
    configure_logging(settings.log_level)
    return args.func(settings, args)


if __name__ == "__main__":
    sys.exit(main())
