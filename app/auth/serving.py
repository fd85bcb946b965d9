"""The check ``msvmav serve`` makes before it listens: beyond loopback, never without a key."""

from __future__ import annotations

import ipaddress

from sqlalchemy.exc import SQLAlchemyError

from app.auth import service
from app.config import Settings
from app.db import make_engine, make_session_factory

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
    (a key row that is not revoked, or MSVMAV_ADMIN_KEY). Needs a migrated database."""
    if settings.auth == "off" or is_loopback(host):
        return settings
    if settings.admin_key is None and not _usable_key_exists(settings.database_url):
        raise ServeRefused(REFUSAL.format(host=host))
    return settings.model_copy(update={"auth": "on"})


def _usable_key_exists(url: str) -> bool:
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            return service.usable_key_exists(session)
    except SQLAlchemyError:
        return False  # no api_keys table (not migrated) or no database: no key either
    finally:
        engine.dispose()
