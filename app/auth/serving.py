"""The check ``msvmav serve`` makes before it listens: beyond loopback, never without a key."""

from __future__ import annotations

import ipaddress

from sqlalchemy import inspect

from app.auth import service
from app.core.config import Settings
from app.core.db import begin_read, make_engine, make_session_factory

REFUSAL = (
    "refusing to serve on {host} without an API key: create one with "
    "`msvmav keys create --scope admin --name me` (or set MSVMAV_ADMIN_KEY), "
    "or set MSVMAV_AUTH=off to serve without keys"
)


class ServeRefused(Exception):  # noqa: N818 - the message is for the operator
    pass


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost``; any other name or address (0.0.0.0, ::) is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve_settings(settings: Settings, host: str) -> Settings:
    """The settings to serve with on ``host``: unchanged on loopback or with MSVMAV_AUTH=off;
    beyond loopback ``auto`` becomes ``on``, and ServeRefused unless a usable key exists
    (a key row that is not revoked, or MSVMAV_ADMIN_KEY). An unmigrated database (no
    ``api_keys`` table) has no key; a database that cannot be reached raises SQLAlchemy's
    error (``msvmav`` prints it as "cannot use the database: ...")."""
    if settings.auth == "off" or is_loopback(host):
        return settings
    if settings.admin_key is None and not _usable_key_exists(settings.database_url):
        raise ServeRefused(REFUSAL.format(host=host))
    return settings.model_copy(update={"auth": "on"})


def _usable_key_exists(url: str) -> bool:
    """True when the ``api_keys`` table exists and holds a key that is not revoked. Errors
    (no connection, no such database) propagate."""
    engine = make_engine(url)
    try:
        if not inspect(engine).has_table("api_keys"):
            return False  # not migrated: no key either
        with make_session_factory(engine)() as session:
            begin_read(session)  # never queue for SQLite's write lock
            return service.usable_key_exists(session)
    finally:
        engine.dispose()
