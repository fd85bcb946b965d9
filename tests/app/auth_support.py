"""Keys for the tests: the admin key a keyed app is started with, a key made straight in the
database (as `msvmav keys create` makes it), and the Authorization header. The fixtures that
use them (``admin_settings``, ``keyed``, ``cli_env``) are in tests/app/conftest.py."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.auth import service
from app.auth.keys import Scope

ADMIN = "admin-key-from-the-environment-0123456789"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def make_key(engine, scope: str, name: str | None = None) -> str:
    """A key created as `msvmav keys create` does, straight in the database."""
    with Session(engine) as session:
        _row, secret = service.create(session, name or f"{scope} key", Scope(scope))
    return secret
