"""Room kept for deleting at a full disk (SQLite).

In WAL mode SQLite writes every change, a ``DELETE`` too, to the ``-wal`` file first: on a full
disk even the delete that would free space fails (``SQLITE_FULL``, a 507). So the API keeps a
reserve file of ``RESERVE_BYTES`` next to a SQLite database (``<database>.reserve``, allocated
with ``posix_fallocate``); ``DELETE /datasets/{id}`` that meets a full disk removes it, deletes
again, and tries to make it anew once the WAL is checkpointed. Deleted rows' pages are reused
by later writes (the database file does not shrink). Nothing is kept for PostgreSQL, whose
server manages its own disk (its WAL segments are recycled)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy.engine import make_url

log = logging.getLogger("app.faults")

RESERVE_BYTES = 8 * 1024 * 1024


def reserve_path(database_url: str) -> Path | None:
    """``<database>.reserve`` for a SQLite database file, else None."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).with_name(Path(url.database).name + ".reserve")


def ensure(database_url: str) -> bool:
    """Make the reserve if it is missing and there is room (True when it exists afterwards);
    a failure leaves no partial file and is not an error."""
    path = reserve_path(database_url)
    if path is None:
        return False
    if path.exists():
        return True
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return False
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError:
        os.close(fd)
        path.unlink(missing_ok=True)
        return False
    os.close(fd)
    return True


def release(database_url: str) -> bool:
    """Remove the reserve (True if there was one): its room is then the database's."""
    path = reserve_path(database_url)
    if path is None or not path.exists():
        return False
    path.unlink(missing_ok=True)
    log.warning("the disk is full: released the %d-byte reserve %s to delete", RESERVE_BYTES, path)
    return True
