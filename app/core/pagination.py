"""Cursor pagination over integer ids, newest first.

The cursor is the last id returned, as decimal digits (CURSOR_PATTERN, stated in the OpenAPI
document; clients pass ``next_cursor`` back as it is); ids only grow (SQLite tables use
AUTOINCREMENT), so a page never repeats or skips rows inserted meanwhile.
"""

from __future__ import annotations

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


# A cursor is the last id of the page before, as decimal digits: any text of this pattern is
# a position (past every id: the first page), and the OpenAPI document says so, so a client
# (or schemathesis) given the pattern finds no cursor it states valid refused.
CURSOR_PATTERN = "^[0-9]{1,18}$"


def encode_cursor(last_id: int) -> str:
    return str(last_id)


def decode_cursor(cursor: str) -> int | None:
    """The id a page starts below (None: past every id, the first page). ``cursor`` matched
    CURSOR_PATTERN (its Query checks it before this runs); 422 naming it otherwise."""
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 18):
        raise invalid(["query", "cursor"], "not a cursor returned by this API")
    value = int(cursor)
    return None if value > MAX_DB_ID else value


def page_params(
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="Page size", examples=[DEFAULT_LIMIT])
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Query(description="`next_cursor` of the previous page; omit for the first page. "
              "Decimal digits: a page starts below the id it names",
              pattern=CURSOR_PATTERN, examples=["42"]),
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
