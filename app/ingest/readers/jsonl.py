"""The JSON Lines reader: the one way any part of the service reads a JSON Lines file (an
upload, a /predict/file or evaluation file, a batch job's input, at submission and in the
worker), and the only module of ``app`` parsing a JSON Lines file's lines.

``chunks`` reads the file a line at a time (blank lines skipped) and gives its records in
chunks of at most ``chunk_rows``: each record's file line, and its JSON object or, for a line
that cannot be a row, why (``BadRecord``: not valid JSON, not an object, more keys than
``max_keys``). The key count is bounded before a line is parsed (the colons outside its strings,
counted in C and numpy), so a line of a million keys is refused without building its object.
Each door decides what a bad record is: an upload's or /predict/file's 4xx naming its line, a
batch job's bad line. A whole-file read is the chunks collected (``app.ingest.columnar``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

#: the records of a chunk when a whole file is read: a chunk's objects are Python dicts, so
#: few of them at a time (the columns are built from them as they come)
WHOLE_FILE_CHUNK_ROWS = 256
_SLICE = 1 << 20


@dataclass(frozen=True)
class BadRecord:
    """A line that is no row: its file ``line``, ``reason`` (a phrase: "the line is an
    array, ..."), and whether it is one for having too many keys (``too_wide``: a limit)."""

    line: int
    reason: str
    too_wide: bool = False


@dataclass
class JsonChunk:
    """Consecutive records of the file: ``lines[k]`` the file line of record ``k``,
    ``objects[k]`` its object (None for a bad record, which ``bad[k]`` explains)."""

    lines: list[int]
    objects: list[dict[str, Any] | None]
    bad: dict[int, BadRecord] = field(default_factory=dict)


def chunks(source: IO[bytes], *, chunk_rows: int = WHOLE_FILE_CHUNK_ROWS,
           max_keys: int | None = None, limit: str = "MSVMAV_MAX_FEATURES"
           ) -> Iterator[JsonChunk]:
    """The file's records, ``chunk_rows`` at a time, in file order (``limit``: the setting a
    too-wide line's reason names)."""
    chunk = JsonChunk([], [])
    for lineno, raw in enumerate(source, start=1):
        if not raw.strip():
            continue
        obj, bad = parse_line(raw, lineno, max_keys, limit)
        if bad is not None:
            chunk.bad[len(chunk.lines)] = bad
        chunk.lines.append(lineno)
        chunk.objects.append(obj)
        if len(chunk.lines) == chunk_rows:
            yield chunk
            chunk = JsonChunk([], [])
    if chunk.lines:
        yield chunk


def first_object(source: IO[bytes], max_keys: int | None = None) -> dict[str, Any] | BadRecord:
    """The first record's object (a file's columns, at a batch job's submission), or why it
    is none; an empty file has an empty object."""
    for chunk in chunks(source, chunk_rows=1, max_keys=max_keys):
        return chunk.bad.get(0) or chunk.objects[0] or {}
    return {}


def parse_line(raw: bytes, lineno: int, max_keys: int | None,
               limit: str = "MSVMAV_MAX_FEATURES") -> tuple[dict[str, Any] | None,
                                                             BadRecord | None]:
    """One line's object, or the ``BadRecord`` saying why it is none."""
    if max_keys is not None and raw.count(b":") > max_keys and (
            _colons_outside_strings(raw) > max_keys):
        return None, BadRecord(lineno, f"the line has more than {max_keys} keys ({limit})",
                               too_wide=True)
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return None, BadRecord(lineno, f"the line is not valid JSON: {_first_line(exc)[:120]}")
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number")
        return None, BadRecord(lineno, f"the line is {kind}, not a JSON object of column "
                                       "values")
    if max_keys is not None and len(value) > max_keys:
        return None, BadRecord(lineno, f"the line has {len(value)} keys; at most {max_keys} "
                                       f"({limit})", too_wide=True)
    return value, None


def _colons_outside_strings(text: bytes) -> int:
    """The colons of a JSON text outside its strings (at least its objects' keys), counted in
    numpy a MiB at a time: memory of about one copy of the text."""
    text = text.replace(b"\\\\", b"")  # escaped backslashes: what is left of a \ escapes
    count, inside = 0, 0
    for start in range(0, len(text), _SLICE):
        piece = np.frombuffer(text, np.uint8, count=min(_SLICE, len(text) - start),
                              offset=start)
        before = np.empty_like(piece)
        before[0] = text[start - 1] if start else 0
        before[1:] = piece[:-1]
        quote = (piece == ord('"')) & (before != ord("\\"))
        parity = (np.cumsum(quote, dtype=np.uint8) + inside) & 1
        count += int(np.count_nonzero((piece == ord(":")) & (parity == 0)))
        inside = int(parity[-1])
    return count


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n", 1)[0]
    return text[:300] or type(exc).__name__
