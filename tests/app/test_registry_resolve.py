"""app.registry.references: references resolve in one read, to what they name, on both
backends; what is missing is named."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from app.core.problems import Problem
from app.core.runtime import Runtime
from app.models.service import model_stamp
from app.registry import service as registry
from app.registry.references import (
    InvalidReference,
    ResolvedModel,
    UnknownReference,
    lookup,
    parse,
    resolve,
    resolve_path,
    resolve_request,
    resolve_serving,
    runtime_reader,
)
from tests.app.support import trained_model


@pytest.fixture
def two_versions(client, worker, engine) -> tuple[int, int]:
    """Registered model 'credit' with versions 1 and 2 (two stored models); alias
    'staging' -> 1."""
    first = trained_model(client, worker)["id"]
    second = trained_model(client, worker, seed=1)["id"]
    with Session(engine) as session:
        registry.create(session, "credit")
        registry.add_version(session, "credit", first)
        registry.add_version(session, "credit", second)
        session.commit()
        registry.set_alias(session, "credit", "staging", 1, actor=None)
    return first, second


def test_references_resolve_to_the_named_model(engine, two_versions):
    first, second = two_versions
    with Session(engine) as s:
        assert resolve(s, "credit@staging") == ResolvedModel(first, "credit", 1, "staging")
        assert resolve(s, "credit/2") == ResolvedModel(second, "credit", 2, None)
        assert resolve(s, "credit") == ResolvedModel(second, "credit", 2, None)  # newest
        assert resolve(s, str(first)) == ResolvedModel(first)


def test_lookup_returns_the_stamp_acquire_compares(engine, settings, two_versions):
    first, _ = two_versions
    runtime = Runtime(engine, settings)
    resolved, stamp = lookup(runtime_reader(runtime), parse("credit@staging"))
    assert resolved.model_id == first
    assert stamp == model_stamp(runtime, first)


def test_resolve_serving_prefers_production_then_newest(engine, two_versions):
    first, second = two_versions
    with Session(engine) as s:
        assert resolve_serving(s, "credit") == ResolvedModel(second, "credit", 2, None)
        assert resolve_serving(s, "credit", 1) == ResolvedModel(first, "credit", 1, None)
        registry.set_alias(s, "credit", "production", 1, actor=None)
        assert resolve_serving(s, "credit") == ResolvedModel(first, "credit", 1, "production")
        with pytest.raises(UnknownReference, match="has no version 9"):
            resolve_serving(s, "credit", 9)
        with pytest.raises(UnknownReference, match="registered model 'nope' not found"):
            resolve_serving(s, "nope")


def test_every_door_of_the_resolver_reads_a_bare_name_alike(engine, settings, two_versions):
    """resolve (invocations), resolve_path (/v2), resolve_request (/predict, batch, feedback)
    and resolve_serving (monitoring, shadow): production's version while it is set, else the
    newest."""
    first, second = two_versions
    runtime = Runtime(engine, settings)
    for alias, expected in (("production", first), (None, second)):
        with Session(engine) as s:
            if alias:
                registry.set_alias(s, "credit", alias, 1, actor=None)
            else:
                registry.delete_alias(s, "credit", "production", actor=None)
            answers = {
                "resolve": resolve(s, "credit"),
                "resolve_path": resolve_path(s, "credit", None),
                "resolve_serving": resolve_serving(s, "credit"),
                "resolve_request": resolve_request(runtime, "credit", ["body", "model"])[0],
            }
        for door, resolved in answers.items():
            assert (resolved.model_id, resolved.alias) == (expected, alias), door
    runtime.close()
    with Session(engine) as s:
        assert resolve_path(s, "credit", "1") == ResolvedModel(first, "credit", 1, None)
        with pytest.raises(UnknownReference, match="is not a version number"):
            resolve_path(s, "credit", "one")


def test_resolve_request_answers_422_naming_the_field_and_404_naming_what_is_missing(
    engine, settings, two_versions
):
    runtime = Runtime(engine, settings)
    with pytest.raises(Problem) as info:
        resolve_request(runtime, "not a reference!", ["body", "model"])
    assert info.value.status == 422 and "body" in str(info.value.errors)
    with pytest.raises(Problem) as info:
        resolve_request(runtime, "credit@nope", ["body", "model"])
    assert info.value.status == 404 and "has no alias 'nope'" in info.value.detail
    runtime.close()


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nope@production", "registered model 'nope' not found"),
        ("credit@production", "registered model 'credit' has no alias 'production'"),
        ("credit/7", "registered model 'credit' has no version 7"),
        ("credit/99999999999", "registered model 'credit' has no version 99999999999"),
        ("nope", "registered model 'nope' not found"),
        ("999999", "model 999999 not found"),
    ],
)
def test_unknown_references_name_what_is_missing(engine, two_versions, ref, message):
    with Session(engine) as s, pytest.raises(UnknownReference) as info:
        resolve(s, ref)
    assert str(info.value) == message
    assert not isinstance(info.value, InvalidReference)


def test_a_registered_model_without_versions_says_so(engine):
    with Session(engine) as s:
        registry.create(s, "empty")
        with pytest.raises(UnknownReference, match="'empty' has no versions"):
            resolve(s, "empty")


@pytest.mark.parametrize(
    "ref",
    [
        "",
        "credit@",
        "credit/",
        "-credit",
        "credit@pro d",
        "a" * 101,
        "credit/-1",
        "credit@x@y",
        "123/1",
        "cr\u00e9dit",
    ],
)
def test_malformed_references_are_invalid(ref):
    with pytest.raises(InvalidReference, match="not a model reference"):
        parse(ref)
