"""The prediction log's spool file: rows the database did not take yet, on local disk.

One file per API process and database, ``prediction-log-<pid>-<random>.jsonl`` in the spool
directory, holding one JSON line per chunk of rows: the ten columns of ``prediction_log``'s
INSERT as ten JSON arrays (no pickle). Lines are appended at the end and taken from the front
(a read offset); when every line was taken the file is emptied. The file is held under an
exclusive ``flock`` while its process lives; a file nobody holds is a dead process's spool, and
the next writer of the same database adopts it (``adopt``: its lines appended to its own file,
the orphan then deleted). At most ``max_bytes`` of lines are held (``push`` says False beyond).
Lines are flushed to the OS at once (they survive the process, not a power cut: no fsync).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("app.monitoring.spool")

PATTERN = "prediction-log-*.jsonl"

Columns = list[list[Any]]


class Spool:
    """See the module's docstring."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.rows = 0  # rows in the lines not yet taken
        self.path: Path | None = None
        self._file: IO[bytes] | None = None
        self._size = 0  # bytes appended (the file's length)
        self._read_at = 0
        self._lengths: list[int] = []  # rows of each line not yet taken, oldest first
        self._head: Columns | None = None

    @property
    def held_bytes(self) -> int:
        return self._size - self._read_at

    def __len__(self) -> int:
        return len(self._lengths)

    def _open(self) -> IO[bytes]:
        """The process's own file, created under a temporary name, locked, then named."""
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = f"{os.getpid()}-{secrets.token_hex(4)}"
            temporary = self.directory / f".creating-{tag}"
            handle = open(temporary, "a+b")  # noqa: SIM115 - held for the process's life
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.path = self.directory / f"prediction-log-{tag}.jsonl"
            temporary.rename(self.path)
            self._file = handle
        return self._file

    def push(self, columns: Columns) -> bool:
        """Append one chunk; False (nothing written) when it would pass ``max_bytes``."""
        line = json.dumps(columns, separators=(",", ":")).encode() + b"\n"
        return self._append(line, len(columns[0]))

    def _append(self, line: bytes, rows: int) -> bool:
        if self.held_bytes + len(line) > self.max_bytes:
            return False
        handle = self._open()
        handle.write(line)
        handle.flush()
        self._size += len(line)
        self._lengths.append(rows)
        self.rows += rows
        return True

    def peek(self) -> Columns | None:
        """The oldest chunk not yet taken (read once, kept until ``pop``), or None."""
        if self._head is None and self._lengths:
            handle = self._open()
            handle.seek(self._read_at)
            line = handle.readline()
            self._head = json.loads(line)
            self._head_bytes = len(line)
        return self._head

    def pop(self) -> int:
        """Take the oldest chunk (after ``peek``); its rows."""
        assert self._head is not None
        self._read_at += self._head_bytes
        self._head = None
        rows = self._lengths.pop(0)
        self.rows -= rows
        if not self._lengths and self._file is not None:
            self._file.truncate(0)
            self._size = self._read_at = 0
        return rows

    def orphans(self) -> bool:
        """Are there spool files other than this one (a stopped writer's, or a live one's)?"""
        if not self.directory.is_dir():
            return False
        return any(path != self.path for path in self.directory.glob(PATTERN))

    def adopt(self) -> tuple[int, int]:
        """Append the lines of every spool file no live process holds to this one, oldest
        file first, and delete them: (rows adopted, rows dropped: unreadable lines, or beyond
        ``max_bytes``)."""
        adopted = dropped = 0
        if not self.directory.is_dir():
            return 0, 0
        for path in sorted(self.directory.glob(PATTERN), key=_mtime):
            if path == self.path:
                continue
            try:
                handle = open(path, "rb")  # noqa: SIM115 - closed below
            except OSError:
                continue
            with handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:  # its process lives (or another writer adopts it now)
                    continue
                for line in handle:
                    rows = _rows_of_line(line)
                    if rows is None or not self._append(line, rows):
                        dropped += rows or 0
                        continue
                    adopted += rows
                path.unlink(missing_ok=True)
        return adopted, dropped

    def close(self) -> None:
        """Release the file: deleted when empty, else left for the next writer to adopt."""
        if self._file is None:
            return
        empty = not self._lengths
        if empty and self.path is not None:
            self.path.unlink(missing_ok=True)
        self._file.close()
        self._file = None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _rows_of_line(line: bytes) -> int | None:
    """The rows of a spool line, None when it is not one (cut short by a crash)."""
    try:
        columns = json.loads(line)
    except ValueError:
        return None
    if not isinstance(columns, list) or len(columns) != 10 or not isinstance(columns[0], list):
        return None
    return len(columns[0])
