"""Request and response bodies of /registered-models."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from app.core.ids import DbId
from app.core.pagination import Page
from app.registry.references import NAME_PATTERN, OPENAPI_NAME_PATTERN


def _not_all_digits(name: str) -> str:
    if name.isdigit():
        raise ValueError("a name may not be all digits (that reads as a model id)")
    return name


#: A registered model's (or an alias's) name.
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=f"^{NAME_PATTERN}$"),
    AfterValidator(_not_all_digits),
    # the document states both rules in one pattern (the validators keep their own messages)
    Field(json_schema_extra={"pattern": f"^{OPENAPI_NAME_PATTERN}$"}),
]
TagKey = Annotated[str, StringConstraints(min_length=1, max_length=100)]
TagValue = Annotated[str, StringConstraints(max_length=1000)]
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=50)]
Description = Annotated[str, StringConstraints(max_length=10_000)]

_WHEN = "2026-01-01T12:00:05Z"
_VERSIONS_EXAMPLE = [
    {
        "version": 2,
        "model_id": 2,
        "algorithm": "msvmav",
        "holdout_accuracy": 0.974,
        "created_at": _WHEN,
    },
    {
        "version": 1,
        "model_id": 1,
        "algorithm": "msvmav",
        "holdout_accuracy": 0.965,
        "created_at": _WHEN,
    },
]
_SUMMARY_EXAMPLE = {
    "name": "wdbc",
    "description": "Breast cancer diagnosis (UCI wdbc)",
    "tags": {"team": "risk"},
    "latest_version": 2,
    "aliases": {"production": 1},
    "created_at": _WHEN,
    "updated_at": _WHEN,
}


class RegisteredModelCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {"name": "wdbc", "description": "Breast cancer diagnosis", "tags": {"team": "risk"}}
            ]
        },
    )

    name: Name = Field(
        description="1-100 letters, digits, `.`, `_`, `-`; starts with a letter or digit; not "
        "all digits (that reads as a model id)"
    )
    description: Description = ""
    tags: Tags = Field(default_factory=dict, description="Free-form string labels")


class RegisteredModelUpdate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"description": "Breast cancer diagnosis, retrained weekly"}]
        },
    )

    description: Description | None = Field(None, description="Replaces the description")
    tags: Tags | None = Field(None, description="Replaces all tags")


class VersionCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        protected_namespaces=(),
        json_schema_extra={"examples": [{"model_id": 1}]},
    )

    model_id: DbId = Field(description="The stored model that becomes the next version")
    create: bool = Field(
        False,
        description="Create the registered model when it does not exist yet (as `msvmav "
        "models register` does), instead of answering 404",
    )


class CanaryIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra={"examples": [{"version": 2, "percent": 10}]},
    )

    version: DbId = Field(description="Another version of the registered model: it answers "
                          "`percent` of the alias's requests at every door")
    percent: float = Field(
        gt=0, lt=100, allow_inf_nan=False,
        description="Share of the alias's requests the canary answers, above 0 and below 100 "
        "(end a canary with `canary: null`; give it all the traffic by pointing the alias at "
        "it). Sticky: a request with the same `X-Msvmav-Route-Key` header (else the same first "
        "row id) always gets the same arm; one without either is drawn at random")

    def spec(self) -> tuple[int, float]:
        return self.version, float(self.percent)


class AliasUpdate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra={"examples": [{"version": 1},
                                        {"version": 1, "canary": {"version": 2, "percent": 10}}]},
    )

    version: DbId = Field(description="The version the alias points at from now on")
    canary: CanaryIn | None = Field(
        None, description="A canary beside it (PUT replaces the alias: without `canary`, a "
        "canary it had ends; to change only the canary, PATCH)")


class AliasPatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra={"examples": [{"canary": {"version": 2, "percent": 10}}]},
    )

    canary: CanaryIn | None = Field(description="The alias's canary from now on (null: end it)")


class CanaryOut(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    version: int
    percent: float
    model_id: int | None = Field(None, description="The canary version's stored model")


class VersionOut(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    version: int
    model_id: int = Field(description="The stored model (`GET /models/{model_id}`)")
    algorithm: str
    holdout_accuracy: float | None
    created_at: datetime = Field(description="When it became a version")
    lineage: dict[str, Any] | None = Field(
        None, description="A retrained version's lineage (POST /registered-models/{name}/"
        "retrain): `parent_version`, `parent_model_id`, `dataset_rows`, `feedback_rows` (the "
        "rows added: fed-back logged rows, one per prediction id), `window` (since, until), "
        "`warm_start` (the warm fit against a cold fit of the same rows: seconds, iterations, "
        "hold-out accuracy); null for a version registered otherwise")


class RegisteredModelSummary(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_SUMMARY_EXAMPLE]})

    name: str
    description: str
    tags: dict[str, str]
    latest_version: int = Field(description="The highest version number given so far (0: none)")
    aliases: dict[str, int] = Field(description="Alias -> version")
    canaries: dict[str, CanaryOut] = Field(
        default_factory=dict, description="Alias -> its canary, for the aliases that have one")
    created_at: datetime
    updated_at: datetime


class RegisteredModelDetail(RegisteredModelSummary):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{**_SUMMARY_EXAMPLE, "versions": _VERSIONS_EXAMPLE}]}
    )

    versions: list[VersionOut] = Field(description="Newest first")


class RegisteredModelPage(Page[RegisteredModelSummary]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_SUMMARY_EXAMPLE], "next_cursor": None}]}
    )


class VersionCreated(BaseModel):
    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={"examples": [{"name": "wdbc", "version": 2, "model_id": 2}]},
    )

    name: str
    version: int
    model_id: int


class AliasOut(BaseModel):
    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "name": "wdbc",
                    "alias": "production",
                    "version": 2,
                    "model_id": 2,
                    "previous_version": 1,
                }
            ]
        },
    )

    name: str
    alias: str
    version: int
    model_id: int
    previous_version: int | None = Field(
        description="Where the alias pointed before this request (null: it did not exist)"
    )
    canary: CanaryOut | None = Field(None, description="Its canary (null: none)")


_MOVE_EXAMPLE = {
    "id": 3,
    "alias": "production",
    "action": "rollback",
    "from_version": 2,
    "to_version": 1,
    "actor": "deploy-bot",
    "moved_at": _WHEN,
}


class AliasMoveOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    alias: str
    action: Literal["set", "delete", "rollback", "rule", "canary"] = Field(
        description="`set` (PUT), `delete`, `rollback`, `rule` (POST /models/{name@alias}"
        "/threshold gave the alias a decision rule), or `canary` (its canary started, changed "
        "or ended, its version kept)"
    )
    from_canary: CanaryOut | None = Field(
        None, description="The alias's canary before the move (null: none)")
    to_canary: CanaryOut | None = Field(
        None, description="Its canary after the move (null: none; a canary ends with any move "
        "that does not give one)")
    from_version: int | None = Field(description="null: the alias was created")
    to_version: int | None = Field(description="null: the alias was removed")
    from_rule: dict[str, Any] | None = Field(
        None, description="The alias's own decision rule before the move (null: its version's)"
    )
    to_rule: dict[str, Any] | None = Field(
        None, description="The alias's own decision rule after it (a move to another version "
        "refits its objective on that version's out-of-fold probabilities; null: its version's)"
    )

    @field_validator("from_rule", "to_rule", mode="before")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value
    actor: str | None = Field(
        description="Name of the API key that moved it (null when keys are off; `policy` for "
        "a retraining policy's automatic move)"
    )
    moved_at: datetime
    reason: str | None = Field(None, description="Why it moved (an automatic move's rule)")
    evidence: dict[str, Any] | None = Field(
        None, description="An automatic move's evidence: the challenger's and production's "
        "record on the same live rows (rows, fed-back rows, realised accuracy, agreement, "
        "estimated accuracy, cost) and the margin it was judged by")


class HistoryPage(Page[AliasMoveOut]):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_MOVE_EXAMPLE], "next_cursor": None}]}
    )
