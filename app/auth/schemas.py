"""Request and response bodies of /keys. No response but the creation's carries the secret, and
none carries its hash."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from app.auth.keys import Scope
from app.core.orm import utcnow
from app.core.pagination import Page
from app.core.timestamps import TIMESTAMP_FORMAT, Timestamp
from app.core.validation import Text

_KEY_EXAMPLE = {
    "id": 3,
    "name": "ci",
    "scope": "read",
    "prefix": "msv_Xq3vN0aB",
    "created_at": "2026-01-01T12:00:00Z",
    "last_used_at": None,
    "revoked_at": None,
    "expires_at": "2027-01-01T00:00:00Z",
}


class KeyCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "ci", "scope": "read"},
                {"name": "contractor", "scope": "read", "expires_at": "2027-01-01T00:00:00Z"},
            ]
        },
    )

    name: Text = Field(
        strict=True, min_length=1, max_length=255, description="What the key is for (no NUL)"
    )
    scope: Scope = Field(
        description="read (GETs, predict) < write (uploads, jobs, deletes) < admin"
    )
    expires_at: Timestamp | None = Field(
        None,
        description=f"When the key stops working ({TIMESTAMP_FORMAT}; UTC when no offset is "
        "given); it must be in the future. Omitted or null: never",
    )

    @field_validator("expires_at")
    @classmethod
    def _in_the_future(cls, value: datetime | None) -> datetime | None:
        if value is not None and value <= utcnow():
            raise PydanticCustomError("past", "must be in the future")
        return value


class KeyOut(BaseModel):
    """An API key without its secret."""

    model_config = ConfigDict(from_attributes=True, json_schema_extra={"examples": [_KEY_EXAMPLE]})

    id: int
    name: str
    scope: Scope
    prefix: str = Field(description="The key's first characters, to recognise it")
    created_at: datetime
    last_used_at: datetime | None = Field(description="Last use (to the minute)")
    revoked_at: datetime | None = Field(description="Set once revoked; a revoked key is refused")
    expires_at: datetime | None = Field(
        None, description="When the key stops working (null: never); an expired key is refused"
    )


class KeyCreated(KeyOut):
    """The new key, with its secret: the only time it is shown."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{**_KEY_EXAMPLE, "key": "msv_Xq3vN0aB" + "x" * 35}]}
    )

    key: str = Field(description="The secret: send it as `Authorization: Bearer <key>`")


class KeyPage(Page[KeyOut]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_KEY_EXAMPLE], "next_cursor": None}]}
    )
