"""Checks of request input that no single route owns: text without NUL characters, JSON bodies
of bounded depth, and single-valued headers.

* ``Text``: a ``str`` without NUL (U+0000) for form fields, query parameters and schema fields.
  PostgreSQL's text columns cannot hold NUL (psycopg refuses it: a 500); SQLite would store it.
  Refused on both with a 422 naming the field.
* ``check_request``: an app-wide dependency (FastAPI runs it after parsing the JSON body and
  before the route's models validate it) that refuses, with a 422 naming the path in the body,
  a JSON body nested deeper than ``MAX_JSON_DEPTH`` (32) levels (pydantic's serializer stops at 255
  and the JSON parsers near 1,000) and any NUL in a JSON string or key at any depth; and NUL in
  a query parameter. Bodies deep enough to stop the JSON parser itself are answered by
  ``app.core.problems`` (``too_deep``), naming ``body``.
* ``check_containers``: a JSON body's arrays and objects counted in C before it is parsed
  (``json_containers``), 413 when there are more than a door's rows allow: the parse of a
  body of millions of empty rows costs a Python object per row, many times the body's size.
* ``single_header``: a header that must appear at most once (400 otherwise).
"""

from __future__ import annotations

import re
from itertools import chain
from typing import Annotated, Any

from fastapi import Request
from pydantic import AfterValidator
from pydantic_core import PydanticCustomError
from starlette.types import Scope

from app.core.problems import MAX_JSON_DEPTH, Problem, invalid, too_deep, too_large

#: Longest key shown in the location of an error (longer ones end in "…").
MAX_LOC_KEY = 40

NUL_MESSAGE = "must not contain NUL (U+0000) characters"
NUL_KEY_MESSAGE = "key must not contain NUL (U+0000) characters"

_JSON_NUL = b"\\u0000"  # how a NUL can appear in JSON text (a raw NUL byte is invalid JSON)
# A JSON string, escapes and all (the unrolled loop: runs of plain bytes matched at once)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("string_nul", NUL_MESSAGE)
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
"""A string without NUL characters: every text a client sends that may reach the database."""


def check_text(loc: list[str | int], value: str | None) -> None:
    """422 naming ``loc`` if ``value`` holds a NUL (for text that no model validates, such as
    an uploaded file's name)."""
    if value and "\x00" in value:
        raise invalid(loc, NUL_MESSAGE)


def _loc_key(key: str) -> str:
    """A dict key as it is shown in an error's location: NUL spelled out, long keys cut."""
    shown = key.replace("\x00", "\\u0000")
    return shown if len(shown) <= MAX_LOC_KEY else shown[:MAX_LOC_KEY] + "…"


def check_json(value: Any, loc: tuple[str | int, ...] = ("body",), *, nul: bool = True) -> None:
    """422 for the first container nested deeper than MAX_JSON_DEPTH (its location, cut at that
    depth) or, with ``nul``, the first string or key holding a NUL. Iterative (no recursion,
    whatever the depth); values other than dicts, lists and strings are leaves. The types in a
    container are collected in C (``map(type, ...)``): only containers that hold containers (or,
    with ``nul``, strings or keys with a NUL) are looked at item by item."""
    if type(value) is str:
        check_text(list(loc), value if nul else None)
    if type(value) is not dict and type(value) is not list:
        return
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, loc)]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise too_deep(list(path))
        is_dict = type(node) is dict
        children = node.values() if is_dict else node
        kinds = set(map(type, children))
        nul_key = nul and is_dict and "\x00" in "".join(node)  # JSON keys are strings
        if not (dict in kinds or list in kinds or nul_key or (nul and str in kinds)):
            continue
        if not nul_key and depth < MAX_JSON_DEPTH and _flat_children(kinds, children, nul):
            continue  # e.g. /predict's rows: lists or objects of scalars, checked in C
        for key, item in node.items() if is_dict else enumerate(node):
            _check_item(stack, key, item, depth, path, nul)


def _flat_children(kinds: set[type], children: Any, nul: bool) -> bool:
    """Every child is a list (or every child a dict) holding only scalars, and, with ``nul``,
    no string and no key with a NUL in them: nothing below to look at."""
    if kinds == {dict}:
        if nul and "\x00" in "".join(chain.from_iterable(children)):
            return False
        grand = set(map(type, chain.from_iterable(map(dict.values, children))))
    elif kinds == {list}:
        grand = set(map(type, chain.from_iterable(children)))
    else:
        return False
    return not (dict in grand or list in grand or (nul and str in grand))


def _check_item(
    stack: list[tuple[Any, int, tuple[str | int, ...]]],
    key: str | int,
    item: Any,
    depth: int,
    path: tuple[str | int, ...],
    nul: bool,
) -> None:
    """One item of a container at ``depth``: a NUL in its key or value raised, a container
    pushed to be looked at."""
    step = _loc_key(key) if type(key) is str else key
    if nul and type(key) is str and "\x00" in key:
        raise invalid([*path, step], NUL_KEY_MESSAGE)
    kind = type(item)
    if kind is dict or kind is list:
        stack.append((item, depth + 1, (*path, step)))
    elif nul and kind is str and "\x00" in item:
        raise invalid([*path, step], NUL_MESSAGE)


def _is_json(request: Request) -> bool:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def json_needs_check(body: bytes) -> bool:
    """Could ``check_json`` refuse this JSON body? Only with a NUL escape in it, or more than
    MAX_JSON_DEPTH opening brackets (two scans in C)."""
    return _JSON_NUL in body or body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH


async def check_request(request: Request) -> None:
    """App-wide dependency: NUL in a query parameter, and a JSON body too deep or holding a NUL
    anywhere (``check_json``), are 422s naming the field. The body was read and parsed by
    FastAPI before dependencies run (``request.json()`` returns that parse); two scans of the
    raw bytes in C skip the walk over the parsed value for nearly every body."""
    for name, value in request.query_params.multi_items():
        check_text(["query", _loc_key(name)], name + value)
    if request.method in ("GET", "HEAD") or not _is_json(request):
        return
    body = await request.body()
    if not json_needs_check(body):
        return
    settings = getattr(request.app.state, "settings", None)
    if settings is not None:  # before the walk's parse (Starlette's, for the protocol doors)
        rows, columns = settings.max_predict_instances, settings.max_features
        check_containers(body, rows + 4 * columns + 16, rows_and_columns_why(rows, columns))
    try:
        parsed = await request.json()
    except ValueError:  # not JSON: the route has no JSON body, or already answered
        return
    check_json(parsed, nul=_JSON_NUL in body)


def json_containers(body: bytes | bytearray, limit: int) -> int:
    """The arrays and objects of JSON text ``body``, counted without parsing it: an upper bound
    that is at most ``limit`` (every ``[`` and ``{``, two scans in C), else the exact count
    outside its strings (for valid JSON: each string replaced by ``""`` first, one pass of a
    regular expression in C and one copy of the text without its strings)."""
    count = body.count(b"[") + body.count(b"{")
    if count <= limit or b'"' not in body:
        return count
    bare = _JSON_STRING.sub(b'""', body)
    return bare.count(b"[") + bare.count(b"{")


def check_containers(body: bytes | bytearray, limit: int, why: str, field: str = "body") -> None:
    """413 naming ``field`` when JSON text ``body`` holds more than ``limit`` arrays and objects
    (``json_containers``), checked before the body is parsed; ``why`` says what bounds them,
    e.g. "a /predict body holds at most 100000 rows (MSVMAV_MAX_PREDICT_INSTANCES)"."""
    count = json_containers(body, limit)
    if count > limit:
        raise too_large(
            f"{field}: the JSON body holds {count} arrays and objects, more than {limit}: {why}",
            field=field,
        )


def rows_and_columns_why(rows: int, columns: int) -> str:
    """Why a body that takes rows may hold so many arrays and objects: a row, or a column's
    tensor (its object, shape, parameters and data) each, and a few more."""
    return (
        f"a request holds at most {rows} rows (MSVMAV_MAX_PREDICT_INSTANCES) of at most "
        f"{columns} columns (MSVMAV_MAX_FEATURES)"
    )


def single_header(scope: Scope, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) if sent once, None if not sent; 400 when sent
    more than once: a client whose proxy and itself both set it must not have one chosen
    for it silently."""
    values = [value for key, value in scope["headers"] if key == name]
    if len(values) > 1:
        label = name.decode("latin-1").title()
        raise Problem(400, f"the {label} header was sent {len(values)} times; send it once")
    return values[0].decode("latin-1") if values else None
