"""A process's runtime state of one database: its engine, the per-request reads' pool, its
session factories and the parts the domains keep beside them (the model cache, the prediction
log's writer, a shadow's scorer, the remembered registry references, the serving lanes).

One ``Runtime`` is made by whoever opens the database: the API's ``create_app`` (and closed at
its lifespan's end), a worker, a CLI command, a test. Nothing is looked up by engine, pool or
event loop in a module global: code reaches the runtime through a typed dependency
(``app.core.deps.RuntimeDep`` and the domains' aliases), as an argument, or from a session its
factories made (``runtime_of``: ``Session.info``, SQLAlchemy's public per-session dictionary).

A domain declares each part it keeps as a typed ``Part`` (its name, how to make it from the
runtime, how to close it); ``Runtime.get`` makes a part on first use and ``Runtime.close``
closes the parts, last made first, then the pools. The runtime knows no domain: the layers'
direction (app.core below the domains) stays as it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.db import fetch_one, read_only, reader_engine

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Session.info key of the runtime whose factories made the session.
RUNTIME_INFO = "msvmav_runtime"


@dataclass(frozen=True, eq=False)
class Part(Generic[T]):
    """A piece of runtime state a domain keeps per database (compared by identity)."""

    name: str
    make: Callable[[Runtime], T]
    close: Callable[[T], None] | None = None


class Runtime:
    """The state of one open database in this process (see the module's docstring).
    ``settings``: app.core.config.Settings (Any here: core's config is read, not typed on)."""

    def __init__(self, engine: Engine, settings: Any) -> None:
        self.engine = engine
        self.settings = settings
        # fetch_one's own small pool (autocommit connections), closed with the runtime
        self.reader = reader_engine(engine)
        info = {RUNTIME_INFO: self}
        self.sessions: sessionmaker[Session] = sessionmaker(
            engine, expire_on_commit=False, info=info
        )
        # GET and HEAD: every transaction read-only (app.core.db.read_only), same pool
        self.read_sessions: sessionmaker[Session] = sessionmaker(
            read_only(engine), expire_on_commit=False, info=info
        )
        self._parts: dict[Part[Any], Any] = {}
        self._lock = threading.Lock()
        self.closed = False

    @property
    def local(self) -> bool:
        """A local file database (SQLite): no network round trips."""
        return self.engine.dialect.name == "sqlite"

    def get(self, part: Part[T]) -> T:
        """The runtime's ``part``, made on first use (once, under a lock)."""
        try:
            return self._parts[part]
        except KeyError:
            pass
        with self._lock:
            if part not in self._parts:
                self._parts[part] = part.make(self)
            return self._parts[part]

    def peek(self, part: Part[T]) -> T | None:
        """The part when it was made; None otherwise (nothing is made)."""
        return self._parts.get(part)

    def fetch_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """``app.core.db.fetch_one`` on this runtime's reader pool."""
        return fetch_one(self.reader, sql, params)

    def close(self) -> None:
        """Close the parts (last made first), then the pools. Idempotent. A part whose close
        fails (a writer's last flush on a database that refuses it) is logged and the others
        are closed all the same: one failure must not leave the rest's threads running."""
        with self._lock:
            parts, self._parts = list(self._parts.items()), {}
        for part, value in reversed(parts):
            if part.close is None or value is None:
                continue
            try:
                part.close(value)
            except Exception:
                logger.exception("closing the runtime's %s failed", part.name)
        self.closed = True
        self.reader.dispose()
        self.engine.dispose()


def session_runtime(session: Session) -> Runtime | None:
    """The runtime whose factories made ``session``; None for a session made otherwise (a
    command's or a test's ``Session(engine)``: it has no runtime state to reach)."""
    runtime = session.info.get(RUNTIME_INFO)
    return runtime if isinstance(runtime, Runtime) else None


def runtime_of(session: Session) -> Runtime:
    """The runtime whose factories made ``session`` (``Runtime.sessions``/``read_sessions``);
    TypeError for any other session."""
    runtime = session_runtime(session)
    if runtime is None:
        raise TypeError("the session was not made by a Runtime's session factories")
    return runtime
