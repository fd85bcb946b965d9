"""The loop's request and answer bodies: a retrain (POST /registered-models/{name}/retrain),
the ``retrain`` job's params, and a retraining policy (PUT …/policy)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.ids import DbId, Whole, whole_in
from app.registry.schemas import Name
from app.training.schemas import SEARCH_MODES, SearchSpec

MAX_WINDOW_SECONDS = 366 * 86400
MAX_ROWS = 2**31 - 1

_RETRAIN_EXAMPLE = {"alias": "production", "window_seconds": 86400}
_POLICY_EXAMPLE = {
    "trigger": {"min_new_labels": 500, "cooldown_seconds": 3600},
    "judge": {"min_rows": 200, "margin": 0.01},
    "action": "promote",
    "rollback": {"probation_seconds": 86400, "margin": 0.01, "min_rows": 200},
}


class RetrainOptions(BaseModel):
    """What a retrain fits on and how (the part a policy's retrains share)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    window_seconds: whole_in(1, MAX_WINDOW_SECONDS) | None = Field(
        None,
        description="Only feedback rows logged in the last this many seconds; null: every "
        "fed-back row logged since the line's first version was registered (a retrained "
        "parent's window start, else the parent's registration)")
    include_dataset: bool = Field(
        True, description="Fit on the parent's training dataset too (false: the fed-back rows "
        "alone, still split by the parent's test_fraction and seed)")
    search: SearchSpec | None = Field(
        None, description="null: the parent's hyper-parameters, warm-started; a search (as "
        "POST /train's: `quick`, `paper`, a grid, `auto`) chooses new ones (then no warm "
        "start: the chosen model is fitted afresh)",
        json_schema_extra={"anyOf": [{"$ref": "#/components/schemas/SearchSpec"},
                                     {"type": "string", "enum": list(SEARCH_MODES)},
                                     {"type": "null"}]})
    warm_start: bool = Field(
        True, description="Start from the parent's solution: MSVMAv's update_fit of the "
        "parent's training rows (linear: its weights carried into the refitted scaling's "
        "coordinates; kernel: its coefficients, scaling and width; docs/loop.md)")
    compare_cold: bool = Field(
        True, description="Also fit the same rows cold, to measure the warm start's saving "
        "(time, iterations, hold-out accuracy: the version's `lineage.warm_start`)")
    split: Literal["fresh", "parent"] = Field(
        "fresh", description="The hold-out split: `fresh` splits all the rows by the parent's "
        "test_fraction and seed; `parent` keeps the parent's split of its rows (its hold-out "
        "rows stay held out, its training rows are all kept: the update only adds rows) and "
        "splits the rows after them")

    @model_validator(mode="before")
    @classmethod
    def _search_by_name(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("search"), str):
            name = value["search"]
            if name not in SEARCH_MODES:
                raise ValueError(f"search: use one of {list(SEARCH_MODES)} or a search object, "
                                 f"got {name!r}")
            value = {**value, "search": None if name == "none" else {"grid": name}}
        return value


class RetrainRequest(RetrainOptions):
    """POST /registered-models/{name}/retrain: the parent is the version ``alias`` or
    ``version`` names (neither: the served one, ``production`` else the newest)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              json_schema_extra={"examples": [_RETRAIN_EXAMPLE]})

    alias: Name | None = Field(None, description="The parent: the version this alias names")
    version: DbId | None = Field(None, description="The parent: this version")


class RetrainJob(BaseModel):
    """A ``retrain`` job's params, fixed at submission."""

    model_config = ConfigDict(extra="forbid")

    name: str
    parent_version: int
    parent_model_id: int
    since: datetime | None
    until: datetime
    include_dataset: bool
    warm_start: bool
    compare_cold: bool
    split: str = "fresh"
    train: dict[str, Any] = Field(description="The fit's TrainJob params (the parent's, or "
                                  "its with the new search resolved)")
    reason: str = "by hand"


class Trigger(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    alert_rule_ids: list[DbId] = Field(
        default_factory=list, max_length=50,
        description="Retrain when one of these alert rules fires (after the policy was set)")
    schedule_seconds: whole_in(60, MAX_WINDOW_SECONDS) | None = Field(
        None, description="Retrain this often")
    min_new_labels: whole_in(1, MAX_ROWS) | None = Field(
        None, description="Retrain once this many fed-back logged rows "
        "(with their inputs kept) arrived since the last retrain")
    cooldown_seconds: Whole = Field(
        3600, ge=0, le=MAX_WINDOW_SECONDS,
        description="At least this long between two retrains the policy starts")


class Judge(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    challenger_alias: Name = Field("challenger", description="The alias the new version gets "
                                   "and the shadow scores")
    production_alias: Name = Field("production", description="The alias a win moves")
    min_rows: Whole = Field(100, ge=1, le=MAX_ROWS, description="Fed-back rows both scored "
                          "before the challenger is judged")
    margin: float = Field(0.01, ge=0, le=1, description="The challenger wins when its "
                          "realised accuracy on those rows exceeds production's by at least "
                          "this, its cost under production's decision rule is not higher")
    holdout_tolerance: float = Field(
        0.05, ge=0, le=1, description="...and its hold-out accuracy is at most this below "
        "production's")
    canary_percent: float | None = Field(
        None, gt=0, lt=100, description="The challenger also answers this share of the "
        "production alias's requests (a canary, sticky by request key) while it is judged, "
        "and is then judged by its canary arm's own rows; null: by its shadow only")


class Rollback(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    probation_seconds: Whole = Field(86400, ge=1, le=MAX_WINDOW_SECONDS,
                                   description="How long a promoted version is watched")
    margin: float = Field(0.01, ge=0, le=1, description="Rolled back when the version it "
                          "replaced (shadowing it as alias `previous_alias`) is more accurate "
                          "by at least this on the fed-back rows both scored")
    min_rows: Whole = Field(100, ge=1, le=MAX_ROWS, description="...on at least this many")
    previous_alias: Name = Field("previous", description="The replaced version's alias "
                                 "during probation")


class PolicyConfig(BaseModel):
    """PUT /registered-models/{name}/policy: when to retrain, how to judge, what to do."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              json_schema_extra={"examples": [_POLICY_EXAMPLE]})

    enabled: bool = True
    trigger: Trigger = Field(default_factory=Trigger)
    retrain: RetrainOptions = Field(default_factory=RetrainOptions)
    judge: Judge = Field(default_factory=Judge)
    action: Literal["register", "promote"] = Field(
        "register", description="`register`: the new version gets the challenger alias and is "
        "shadowed, nothing more; `promote`: the production alias moves to it when it wins, and "
        "back when it then loses within the probation")
    rollback: Rollback = Field(default_factory=Rollback)

    @model_validator(mode="after")
    def _distinct_aliases(self) -> PolicyConfig:
        names = [self.judge.challenger_alias, self.judge.production_alias,
                 self.rollback.previous_alias]
        if len(set(names)) != 3:
            raise ValueError("judge.challenger_alias, judge.production_alias and "
                             "rollback.previous_alias must be three different aliases")
        return self


class PolicyOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "name": "wdbc", "enabled": True,
        "config": PolicyConfig.model_validate(_POLICY_EXAMPLE).model_dump(mode="json"),
        "state": {"phase": "idle"}, "record": None}]})

    name: str
    enabled: bool
    config: PolicyConfig
    state: dict[str, Any] = Field(description="Where its cycle stands: `phase` (idle, "
                                  "retraining, shadowing, probation), the job, the "
                                  "challenger, the last decision with its evidence")
    record: dict[str, Any] | None = Field(
        None, description="The challenger's record beside production's now (app.loop.judge): "
        "`source` (its canary arm's rows, else its shadow's), fed-back rows, each side's "
        "realised and estimated accuracy and cost under production's decision rule, the "
        "shadow's agreement, hold-out accuracies, the `shadow` and `canary` records")
    updated_at: datetime
