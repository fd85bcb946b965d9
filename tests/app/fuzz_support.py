"""What the fuzz tests share (tests/app/test_fuzz.py, tests/app/test_fuzz_acceptance.py): the
checks, the OpenAPI document parsed once per process, the admin key every fuzzed request
carries (with its ``settings`` and ``auth_headers`` fixtures), the operations to fuzz, and the
app without a lifespan of its own for schemathesis."""

from __future__ import annotations

import pytest
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

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
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
