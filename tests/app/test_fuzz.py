"""Schemathesis over every operation of the ASGI app, in process, on each test database:
no 5xx, and every answer conforms to the OpenAPI document (status code, content type,
headers, body schema). Bounded: a few examples per operation, no deadline."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from pydantic import SecretStr
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.core.config import Settings
from app.main import create_app
from tests.app.support import blobs, to_csv

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
MAX_EXAMPLES = 20
CASES: Counter[str] = Counter()
# The OpenAPI document as the first fuzzed app in this process served it, parsed by schemathesis
# for each test: it depends on neither the database nor the case, and making it takes seconds
# per app.
DOCUMENT: list[dict] = []


# The service is fuzzed as deployed: keys required, every request with the admin key (given by
# MSVMAV_ADMIN_KEY, so a fuzzed DELETE /keys/{id} cannot revoke it); auth itself has its own tests.
ADMIN_KEY = "msv_fuzz-admin-key-0123456789abcdefghij"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"admin_key": SecretStr(ADMIN_KEY)})


@pytest.fixture
def auth_headers() -> dict[str, str]:
    """Headers every fuzzed request carries."""
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


def _cases() -> list[tuple[str, GenerationMode]]:
    """("METHOD /path", mode) of every operation (the document does not depend on the
    database): valid data, and invalid data where the operation takes any input."""
    spec = create_app(Settings(database_url="sqlite://", _env_file=None)).openapi()
    out = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            label = f"{method.upper()} {path}"
            out.append((label, GenerationMode.POSITIVE))
            if op.get("parameters") or op.get("requestBody"):
                out.append((label, GenerationMode.NEGATIVE))
    return out


@pytest.fixture(scope="module", autouse=True)
def _report_case_count():
    yield
    per_backend = ", ".join(f"{k}: {v}" for k, v in CASES.items())
    print(f"\nschemathesis: {sum(CASES.values())} cases ({per_backend})")


def _requests_only(app):
    """The app for schemathesis without a lifespan of its own: the ``client`` fixture runs the
    app's (startup and shutdown, once). schemathesis starts the lifespan of every ASGI app it is
    given and stops none before the process exits: given the app itself, each test left a
    second runtime (its background threads and database engine) running for the rest of the
    suite."""

    async def requests_only(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        await app(scope, receive, send)

    return requests_only


@pytest.mark.parametrize(("label", "mode"), _cases())
def test_every_operation_conforms(app, client, auth_headers, database_url, label, mode):
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
