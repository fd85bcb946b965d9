"""Typed dependencies, so route signatures say what they need."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; services commit once at the end of a write, anything not
    committed is rolled back, so a failing request leaves nothing half-written."""
    yield from session_scope(request.app.state.session_factory)


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
