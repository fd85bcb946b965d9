"""schemathesis' positive_data_acceptance, with the conformance checks of test_fuzz, over every
operation of the OpenAPI document on each test database: a request the document allows is
accepted (2xx, or 401/403/404/409), never a 400 or 422 (issue 45: 38 such requests were
refused). What made them refused, and is now in the document:

* form fields have no null (app.openapi.forms_without_null): the text ``null`` was sent;
* the exactly-one, at-most-one and together rules of a body (app.openapi.state_field_rules);
* the registry's name and reference patterns on path parameters, the id range on ``*_id``;
* ``30.0`` is an integer, as JSON Schema and pydantic's lax mode read it (app.core.ids.Whole:
  the strict models refused it on /train, the alert rules and /experiments);
* no string or key of a JSON body holds a NUL, at any depth (app.openapi.json_without_nul);
* /predict/file's ``ids`` text is a JSON array (a pattern), a webhook's url http(s) (a
  pattern beside ``format: uri``), a /v2 input's name not empty, an experiment's lists
  without repeats (``uniqueItems``), invocations' body one of its four keys (``oneOf``);
* an unknown id or alias in a body or query is a 404 naming the field (app.core.problems.unknown),
  a reused Idempotency-Key a 409 (app.core.idempotency).

The few rules JSON Schema cannot state (they relate two query parameters or two fields, or are
the grammar of an uploaded file, docs/ingest.md) are said in words in the description; a 422 is
accepted for those alone (``STATED_IN_WORDS``), and the protocol doors' 400 for theirs
(``PROTOCOL_RULES_IN_WORDS``), each checked to be in the document. Every operation is strict:
a request the document allows and the service refuses fails the test."""

from __future__ import annotations

import re

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.monitoring.schemas import LABELS_PER_ID
from tests.app.fuzz_support import (  # noqa: F401 - the fixtures of the fuzzed service
    ADMIN_KEY,
    CHECKS,
    DOCUMENT,
    _cases,
    _requests_only,
    auth_headers,
    settings,
)
from tests.app.support import blobs, to_csv

MAX_EXAMPLES = 12
OPERATIONS = [label for label, mode in _cases() if mode is GenerationMode.POSITIVE]
# (field, message start) of the 422s whose rule the document gives in words only
STATED_IN_WORDS = {
    ("until", "must be after since"),
    ("cost_fp", "give cost_fp and cost_fn together"),
    ("cost_fn", "give cost_fp and cost_fn together"),
    ("version", "give alias or version, not both"),
    ("expires_at", "must be in the future"),  # relative to the request's time
    ("labels", LABELS_PER_ID),  # as many as ids (POST /feedback)
    ("cost_matrix", "the matrix must be"),  # k × k for the models' k classes (leaderboard)
}
# (phrase in the document, the whole 400 message) of the protocol doors' rules between fields of
# a body (the same name twice, a shape's product, one id per row): /v2 and MLflow's invocations
# answer 400 (their protocols' status), and only a model they score reads past them
PROTOCOL_RULES_IN_WORDS = {
    ("two inputs have the same name", r"two inputs have the same name"),
    ("its shape holds", r"input '.*' has \d+ values; its shape holds \d+"),
    ("binary_data_size is", r"input '.*': binary_data_size is \d+ bytes; .*"),
    ("bytes of binary data after the JSON header",
     r"input '.*': binary_data_size .* goes beyond the \d+ bytes of binary data after the JSON "
     r"header"),
    ("holds no rows", r"\w+ holds no rows"),
    ("give one per row", r"params\.ids \d+ ids for \d+ rows; give one per row"),
    ("one per column",
     r"dataframe_split\.data\[\d+\] must be a list of \d+ values, one per column"),
    ("the columns have different lengths", r"\w+: the columns have different lengths \[.*\]"),
}
# The uploaded file's own content (its grammar is docs/ingest.md's, not the document's)
FILE_FIELDS = {"file", "label", "drop", "id_column", "passthrough"}


def _stated_in_words(response) -> bool:
    if response.status_code == 400:
        detail = response.json().get("detail", "")
        return any(re.fullmatch(rule, detail, re.DOTALL) for _, rule in PROTOCOL_RULES_IN_WORDS)
    if response.status_code != 422:
        return False
    body = response.json()
    errors = body.get("errors") or []
    if body.get("type", "").endswith("ingest-error"):
        return True
    return bool(errors) and all(
        e.get("field") in FILE_FIELDS and e.get("loc", [""])[0] == "body"
        or any(e.get("field", "").split("[")[0] == f and m in e.get("message", "")
               for f, m in STATED_IN_WORDS)
        for e in errors
    )


def accepted_unless_stated_in_words(ctx, response, case):
    """positive_data_acceptance, but for a 422 of a rule the document states in words."""
    if _stated_in_words(response):
        return None
    return positive_data_acceptance(ctx, response, case)


def test_the_rules_accepted_in_words_are_in_the_document(client, auth_headers):  # noqa: F811
    text = str(client.get("/openapi.json", headers=auth_headers).json())
    for _, message in STATED_IN_WORDS:
        assert message in text, message
    for phrase, _ in PROTOCOL_RULES_IN_WORDS:
        assert phrase in text, phrase


@pytest.mark.parametrize("label", OPERATIONS)
def test_valid_data_is_accepted(app, client, auth_headers, label):  # noqa: F811
    r = client.post(
        "/datasets", files={"file": ("d.csv", to_csv(*blobs(n=20)))}, headers=auth_headers
    )
    assert r.status_code == 201, r.text
    if not DOCUMENT:
        DOCUMENT.append(client.get("/openapi.json", headers=auth_headers).json())
    schema = schemathesis.openapi.from_dict(DOCUMENT[0])
    schema.app = _requests_only(app)
    schema.location = "/openapi.json"
    operation = schema.find_operation_by_label(label)

    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    @hypothesis_settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
                         database=None, suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        case.call_and_validate(headers=auth_headers,
                               checks=[*CHECKS, accepted_unless_stated_in_words])

    run()


def test_integers_take_a_zero_fraction_and_bounds_are_json_schema(client, auth_headers):  # noqa: F811
    """5.0 is an integer (the strict models refused it); a bound on an optional integer is the
    document's ``minimum``/``maximum`` (pydantic put ``ge``/``le`` there, which no validator
    reads, when the bound sat outside the integer's validator)."""
    document = client.get("/openapi.json", headers=auth_headers).json()
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            assert not ({"ge", "le", "gt", "lt"} & set(node) and "type" in node), node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    r = client.post("/alert-rules", headers=auth_headers, json={
        "model_id": 1, "metric": "rows", "comparison": "lt", "level": 1,
        "window_seconds": 60.0, "min_rows": 5.0})
    assert r.status_code == 404, r.text  # past validation: model 1 does not exist
    r = client.post("/alert-rules", headers=auth_headers, json={
        "model_id": 1, "metric": "rows", "comparison": "lt", "level": 1, "min_rows": "5"})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "min_rows", r.text
