"""A large /predict body's rows read straight into a float array, without a Python object per
number.

``orjson.loads`` of a body at the 32 MiB limit makes about 4 million Python floats and their
lists: 8.5 times the body in memory. ``split_body`` instead finds the top-level
``"instances"`` array and parses the rest of the body (``model_id``, ``labels``) on its own; the
rows stay bytes in a ``NumericRows``, which FastAPI's validation of ``PredictRequest`` passes
through as the only element of ``instances``. Once the model is known, ``NumericRows.matrix``
reads the rows into one float64 array, a slice of about CHUNK_BYTES at a time (each slice parsed
by orjson, so the JSON grammar is exactly orjson's), and gives up (None) on anything that is not
a rectangle of finite JSON numbers. Then the caller takes ``NumericRows.rows_list``, the rows as
``json.loads`` would give them, down the usual path, which answers every mistake as before.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from typing import Any

import numpy as np
from fastapi.exceptions import RequestValidationError

from app.core.fastjson import loads
from app.core.validation import check_containers, json_containers
from app.ingest.prediction_file import number_table
from app.serving.scoring import check_rows

# Bodies smaller than this are parsed whole: their Python objects cost little.
MIN_BYTES = 1024 * 1024
# Bytes of rows parsed at a time.
CHUNK_BYTES = 1024 * 1024
KEY = b'"instances"'
_START = re.compile(rb'"instances"\s*:\s*\[')
_END = re.compile(rb"\]\s*\]")  # the last row's end and the array's (rows hold no brackets)
_WHITESPACE = b" \t\r\n"


class NumericRows:
    """The bytes of the top-level ``instances`` array of a /predict body: ``body[start:end]``."""

    def __init__(self, body: bytes, start: int, end: int) -> None:
        self.body = body
        self.start = start
        self.end = end
        # Rows if every row is a list of numbers; an upper bound otherwise. Counted without
        # copying, so that the row limit is checked before anything is allocated for them.
        self.n_rows = body.count(b"[", start + 1, end)

    def rows_list(self) -> list[Any]:
        """The rows as the whole body's parse would have given them; when they are not JSON,
        the whole body's parse answers (FastAPI's 422 for invalid JSON, as before the split:
        ``split_body`` checked only the rest of the body)."""
        try:
            return loads(self.body[self.start : self.end])
        except ValueError:
            return _parse_whole(self.body)["instances"]

    def matrix(self) -> np.ndarray | None:
        """The rows as an (n, k) float64 array, if every row is a list of k JSON numbers
        (true/false are not numbers here) and every value is finite; None otherwise."""
        out: np.ndarray | None = None
        filled = 0
        for piece in self._pieces():
            if piece is None:
                return None
            try:
                rows = loads(piece)
            except ValueError:
                return None
            if not rows or not all(type(r) is list for r in rows):
                return None
            block = number_table(rows)
            if block is None:
                return None
            if out is None:
                out = np.empty((self.n_rows, block.shape[1]), dtype=np.float64)
            if block.shape[1] != out.shape[1] or filled + len(block) > len(out):
                return None
            out[filled : filled + len(block)] = block
            filled += len(block)
        if out is None or filled != len(out) or not np.isfinite(out).all():
            return None
        return out

    def _pieces(self) -> Iterator[bytes | None]:
        """The rows as JSON arrays of about CHUNK_BYTES each, cut after a row's closing
        bracket; exactly one comma between pieces, as between rows (None: no comma there, so
        these are not rows of numbers)."""
        body, pos, stop = self.body, self.start + 1, self.end - 1  # inside the outer brackets
        first = True
        while pos < stop:
            cut = body.find(b"]", min(pos + CHUNK_BYTES, stop), stop)
            cut = stop if cut < 0 else cut + 1
            piece = body[pos:cut]
            pos = cut
            if not first:
                piece = piece.lstrip(_WHITESPACE)
                if not piece.startswith(b","):
                    yield None
                    return
                piece = piece[1:]
            first = False
            yield b"[" + piece + b"]"


def _parse_whole(body: bytes) -> Any:
    """``loads(body)``, or the RequestValidationError FastAPI raises for a body that is not
    JSON (the same error, position and all)."""
    try:
        return loads(body)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ],
            body=exc.doc,
        ) from exc


def row_count(instances: list[Any]) -> int:
    """Rows in a request's ``instances`` (an upper bound for unparsed ``NumericRows``)."""
    if len(instances) == 1 and isinstance(instances[0], NumericRows):
        return instances[0].n_rows
    return len(instances)


def check_body(body: bytes, settings: Any) -> None:
    """413 before a /predict body is parsed (split or whole) when it holds more arrays and
    objects than its rows may be (each row one, plus the body, ``instances``, ``labels``,
    ``ids``): a body of 6.7 million empty rows was parsed whole (+2 GB) to learn it had too
    many. Counted in C (app.core.validation.json_containers); when the extra ones are the rows
    of ``instances``, the answer is the row limit's own (naming ``instances`` and the rows)."""
    rows = settings.max_predict_instances
    count = json_containers(body, rows + 8)
    if count <= rows + 8:
        return
    split = _split(body, max_outside=8)
    if split is not None:
        _rest, begin, stop, outside = split
        check_rows(count - outside - 1, settings, "instances")
    why = f"a /predict body holds at most {rows} rows (MSVMAV_MAX_PREDICT_INSTANCES)"
    check_containers(body, rows + 8, why)


def _brackets(body: bytes, start: int, end: int | None = None) -> int:
    return body.count(b"[", start, end) + body.count(b"{", start, end)


def split_body(body: bytes) -> dict[str, Any] | None:
    """The body parsed with its top-level ``instances`` array left as bytes: the dict with
    ``instances`` = [NumericRows]; None when the body is small or the array cannot be told
    apart with certainty (then the whole body is parsed as usual)."""
    if len(body) < MIN_BYTES:
        return None
    split = _split(body)
    if split is None:
        return None
    parsed, begin, stop, _outside = split
    parsed["instances"] = [NumericRows(body, begin, stop)]
    return parsed


def _split(
    body: bytes, max_outside: int | None = None
) -> tuple[dict[str, Any], int, int, int] | None:
    """The body without its top-level ``instances`` array, parsed; the array's span
    ``body[begin:stop]``; and the arrays and objects outside it (exact, outside strings). None
    when the array cannot be told apart with certainty, or (``max_outside``) when more than
    that many arrays and objects are outside it (the rest is then not parsed)."""
    if body.count(KEY) != 1:
        return None
    start = _START.search(body)
    if start is None:
        return None
    end = _END.search(body, start.end())
    if end is None:
        return None
    begin, stop = start.end() - 1, end.end()
    if max_outside is not None and _brackets(body, 0, begin) + _brackets(body, stop) > max_outside:
        return None  # (an upper bound, counted in place: the rest is not even copied)
    # The rest of the body, with a marker no client can know in the array's place: only if
    # the parse finds the marker as the top-level "instances" were these bytes that array.
    token = secrets.token_hex(8)
    marker = f"\x00rows-{token}"
    rest = body[:begin] + f'"\\u0000rows-{token}"'.encode() + body[stop:]
    outside = json_containers(rest, -1)
    if max_outside is not None and outside > max_outside:
        return None
    try:
        parsed = loads(rest)
    except ValueError:
        return None
    if type(parsed) is not dict or parsed.get("instances") != marker:
        return None
    return parsed, begin, stop, outside
