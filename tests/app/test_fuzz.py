"""Schemathesis over every operation of the ASGI app, in process, on each test database:
no 5xx, and every answer conforms to the OpenAPI document (status code, content type,
headers, body schema). Bounded: a few examples per operation, no deadline."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

from tests.app.fuzz_support import (  # noqa: F401 - the fixtures of the fuzzed service
    CHECKS,
    DOCUMENT,
    _cases,
    _requests_only,
    auth_headers,
    settings,
)
from tests.app.support import blobs, to_csv

MAX_EXAMPLES = 20
CASES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_case_count():
    yield
    per_backend = ", ".join(f"{k}: {v}" for k, v in CASES.items())
    print(f"\nschemathesis: {sum(CASES.values())} cases ({per_backend})")


@pytest.mark.parametrize(("label", "mode"), _cases())
def test_every_operation_conforms(app, client, auth_headers, database_url, label, mode):  # noqa: F811
    # one stored dataset, so that list and detail answers are exercised too
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
    backend = database_url.split(":", 1)[0]

    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis_settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case) -> None:
        CASES[backend] += 1
        case.call_and_validate(headers=auth_headers, checks=CHECKS)

    run()
