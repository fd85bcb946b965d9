"""Cursor pagination over integer ids, newest first.

The cursor is opaque to clients (urlsafe base64 of the last id returned); ids only grow (SQLite
tables use AUTOINCREMENT), so a page never repeats or skips rows inserted meanwhile.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Annotated, Any, Generic, Self, TypeVar

from fastapi import Depends, Query
from pydantic import BaseModel, Field
from sqlalchemy import Select
from sqlalchemy.orm import Session

from app.core.ids import MAX_DB_ID
from app.core.problems import invalid

T = TypeVar("T")

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


class PageParams(BaseModel):
    limit: int
    after_id: int | None


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "id" or not (value.isascii() and value.isdigit()):
            raise ValueError
        if len(value) > 10 or int(value) > MAX_DB_ID:
            raise ValueError
        return int(value)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid(["query", "cursor"], "not a cursor returned by this API") from None


def page_params(
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="Page size", examples=[DEFAULT_LIMIT])
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Query(description="`next_cursor` of the previous page; omit for the first page"),
    ] = None,
) -> PageParams:
    return PageParams(limit=limit, after_id=decode_cursor(cursor) if cursor else None)


PageDep = Annotated[PageParams, Depends(page_params)]


class Page(BaseModel, Generic[T]):
    items: list[T] = Field(description="This page, newest first")
    next_cursor: str | None = Field(
        description="Pass as `cursor` to get the next page; null on the last page"
    )

    @classmethod
    def of(cls, rows_and_cursor: tuple[list, str | None], item: Callable[[Any], T]) -> Self:
        """The page of ``paginate``'s rows, each turned into an item by ``item``."""
        rows, next_cursor = rows_and_cursor
        return cls(items=[item(r) for r in rows], next_cursor=next_cursor)


def paginate(
    session: Session, stmt: Select, id_column: Any, page: PageParams
) -> tuple[list, str | None]:
    """Rows of ``stmt`` (a select of one ORM entity) for this page, and the next cursor."""
    if page.after_id is not None:
        stmt = stmt.where(id_column < page.after_id)
    rows = list(session.scalars(stmt.order_by(id_column.desc()).limit(page.limit + 1)))
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    return rows, (encode_cursor(rows[-1].id) if more and rows else None)
