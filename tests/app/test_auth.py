"""API keys with scopes: every route's authorisation, the key lifecycle, MSVMAV_AUTH and
MSVMAV_ADMIN_KEY, the CLI and ``msvmav serve``'s refusal (SQLite, and PostgreSQL when
TEST_DATABASE_URL is set)."""

from __future__ import annotations

import hashlib
import hmac
import re
import signal
import time
from collections.abc import Iterator

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.auth import security, service
from app.auth.gate import OPEN_RECHECK_SECONDS
from app.auth.orm import ApiKey
from app.auth.serving import ServeRefused, is_loopback, serve_settings
from app.cli import main as cli
from app.core.config import Settings
from app.main import create_app
from tests.app.auth_support import ADMIN, bearer, make_key
from tests.app.support import assert_problem, wait_for

OPEN_PATHS = {
    "/livez",
    "/readyz",
    "/v2/health/live",
    "/v2/health/ready",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/openapi.json",
    # the web interface's page shells: no data in them (their scripts read the API with a key)
    "/",
    "/ui",
    *(f"/ui/{page}" for page in ("datasets", "jobs", "models", "registry", "monitoring",
                                 "experiments", "keys")),
    *(f"/ui/{page}/999999" for page in ("datasets", "jobs", "models", "registry", "monitoring",
                                        "experiments")),
    # the tab's icon and the page's sign-in probe (always 200, it tells no more than a 401 would)
    "/ui/favicon.svg",
    "/ui/session",
}
READ_POSTS = {
    "/predict",
    "/predict/file",
    "/v2/models/999999/infer",
    "/v2/models/999999/versions/999999/infer",
    "/models/999999/invocations",
    # a model's evaluation and explanations only read, like /predict
    "/models/999999/evaluate",
    "/models/999999/evaluate.png",
    "/models/999999/evaluate.svg",
    "/models/999999/explain",
    # the leaderboard scores models on their hold-outs: it only reads, like evaluate
    "/models/leaderboard",
}
RANK = {"read": 0, "write": 1, "admin": 2}
KEY_PATTERN = re.compile(r"^msv_[A-Za-z0-9_-]{43}$")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def key_rows(engine) -> list[ApiKey]:
    with Session(engine) as session:
        return list(session.scalars(select(ApiKey).order_by(ApiKey.id)))


def expected_scope(method: str, path: str) -> str | None:
    """The issue's table, written independently of the app's wiring."""
    if path in OPEN_PATHS:
        return None
    if path.startswith("/keys"):
        return "admin"
    if path.startswith("/webhooks") and method not in ("GET", "HEAD"):
        return "admin"  # a webhook makes the service send to any URL
    if method in ("GET", "HEAD") or path in READ_POSTS:
        return "read"
    return "write"


def operations(app) -> list[tuple[str, str]]:
    """Every (method, concrete path) the app serves; path parameters set to an unused id."""
    ops = []
    for route in iter_route_contexts(app.routes):
        path = re.sub(r"\{[^}]+\}", "999999", route.path)
        ops += [(m, path) for m in sorted(route.methods or ()) if m != "HEAD"]
    return ops


# --- every route ---------------------------------------------------------------------------------


def test_every_route_needs_its_scope(keyed, engine):
    keys = {scope: make_key(engine, scope) for scope in RANK}
    ops = operations(keyed.app)
    paths = {p for _m, p in ops}
    # the iteration is not vacuous: the routers' routes, /keys and the docs are all there
    assert {"/datasets", "/train", "/predict", "/keys", "/keys/999999", "/metrics"} <= paths
    monitoring = {"/models/999999/monitoring", "/registered-models/999999/monitoring"}
    assert {"/feedback", *monitoring} <= paths  # (app.monitoring's routes)
    # the registry's routes: reads need read, changes (rollback too) write
    assert {
        ("POST", "/registered-models"),
        ("GET", "/registered-models/999999"),
        ("PATCH", "/registered-models/999999"),
        ("POST", "/registered-models/999999/versions"),
        ("DELETE", "/registered-models/999999/versions/999999"),
        ("PUT", "/registered-models/999999/aliases/999999"),
        ("POST", "/registered-models/999999/aliases/999999/rollback"),
        ("GET", "/registered-models/999999/history"),
    } <= set(ops)
    assert expected_scope("POST", "/registered-models/x/aliases/y/rollback") == "write"
    assert {("GET", "/models/999999/export"), ("POST", "/models/import")} <= set(ops)
    assert paths >= OPEN_PATHS and len(ops) >= 30
    for method, path in ops:
        needed = expected_scope(method, path)
        anonymous = keyed.request(method, path)
        if needed is None:
            assert anonymous.status_code == 200, (method, path, anonymous.text)
            continue
        body = assert_problem(anonymous, 401)
        assert anonymous.headers["www-authenticate"] == "Bearer", (method, path)
        assert "Authorization: Bearer" in body["detail"]
        wrong = keyed.request(method, path, headers=bearer("msv_" + "x" * 43))
        assert_problem(wrong, 401)
        assert wrong.headers["www-authenticate"].startswith("Bearer"), (method, path)
        for scope, key in keys.items():
            r = keyed.request(method, path, headers=bearer(key))
            if RANK[scope] < RANK[needed]:
                problem = assert_problem(r, 403)
                assert problem["required_scope"] == needed, (method, path, problem)
                assert problem["scope"] == scope
            else:
                assert r.status_code not in (401, 403), (method, path, scope, r.text)
        r = keyed.request(method, path, headers=bearer(ADMIN))
        assert r.status_code not in (401, 403), (method, path, "MSVMAV_ADMIN_KEY", r.text)


def test_open_paths_answer_without_a_key(keyed):
    assert keyed.get("/livez").json() == {"status": "ok", "database": None, "migrations": None}
    assert keyed.get("/readyz").json()["status"] == "ok"
    assert "swagger" in keyed.get("/docs").text.lower()
    assert keyed.get("/openapi.json").json()["info"]["title"] == "msvmav"


def test_malformed_authorization_headers_get_401(keyed, engine):
    key = make_key(engine, "admin")
    for value in (
        f"Basic {key}",
        "Bearer",
        "Bearer ",
        key,  # no scheme
        f"Bearer {key}x",
        f"Bearer {key[:-1]}",
        "Bearer " + "a" * 100_000,
        f"Bearer {ADMIN[:-1]}",
    ):
        r = keyed.get("/datasets", headers={"Authorization": value})
        assert_problem(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer")
    # the scheme is case-insensitive (RFC 9110), the key is not
    assert keyed.get("/datasets", headers={"Authorization": f"bearer {key}"}).status_code == 200
    r = keyed.get("/datasets", headers={"Authorization": f"Bearer {key.upper()}"})
    assert r.status_code == 401


def test_no_key_is_refused_before_the_body_is_read(keyed):
    """An anonymous request gets 401, not the 422 its body would earn: nothing parsed it."""
    r = keyed.post("/train", content=b"{not json", headers={"content-type": "application/json"})
    assert_problem(r, 401)
    r = keyed.post("/datasets", files={"file": ("a.csv", b"x,y\n" * 10_000)})
    assert_problem(r, 401)


# --- key lifecycle -------------------------------------------------------------------------------


def test_key_lifecycle_shown_once_hashed_revoked_at_once(keyed, engine):
    admin = bearer(ADMIN)
    r = keyed.post("/keys", json={"name": "ci", "scope": "read"}, headers=admin)
    assert r.status_code == 201, r.text
    created = r.json()
    secret = created["key"]
    assert KEY_PATTERN.match(secret), secret
    assert r.headers["location"] == f"/keys/{created['id']}"
    assert created["scope"] == "read" and created["name"] == "ci"
    assert created["prefix"] == secret[:12] and created["revoked_at"] is None

    # stored as its SHA-256 only: no column holds the secret
    (row,) = key_rows(engine)
    assert row.key_hash == sha256(secret)
    columns = [getattr(row, c.key) for c in ApiKey.__table__.columns]
    assert not any(isinstance(v, str) and secret in v for v in columns), columns

    # never shown again, neither the secret nor its hash
    detail = keyed.get(r.headers["location"], headers=admin)
    listing = keyed.get("/keys", headers=admin)
    for answer in (detail, listing):
        assert answer.status_code == 200
        assert secret not in answer.text and sha256(secret) not in answer.text
        assert "key_hash" not in answer.text and '"key"' not in answer.text
    assert [k["id"] for k in listing.json()["items"]] == [created["id"]]

    # it works, for what its scope allows, and its use is recorded
    assert keyed.get("/datasets", headers=bearer(secret)).status_code == 200
    wait_for(lambda: key_rows(engine)[0].last_used_at is not None, timeout=10)  # background
    assert_problem(keyed.post("/train", json={}, headers=bearer(secret)), 403)

    # revoked: refused on the very next request
    assert keyed.delete(f"/keys/{created['id']}", headers=admin).status_code == 204
    assert_problem(keyed.get("/datasets", headers=bearer(secret)), 401)
    revoked_at = keyed.get(f"/keys/{created['id']}", headers=admin).json()["revoked_at"]
    assert revoked_at is not None
    # revoking again is harmless and keeps the first time; unknown ids are 404
    assert keyed.delete(f"/keys/{created['id']}", headers=admin).status_code == 204
    assert keyed.get(f"/keys/{created['id']}", headers=admin).json()["revoked_at"] == revoked_at
    assert_problem(keyed.delete("/keys/999999", headers=admin), 404)
    assert_problem(keyed.delete("/keys/2147483648", headers=admin), 404)
    assert_problem(keyed.get("/keys/0", headers=admin), 404)


def test_created_keys_get_their_scope(keyed):
    admin = bearer(ADMIN)
    made = {}
    for scope in RANK:
        r = keyed.post("/keys", json={"name": scope, "scope": scope}, headers=admin)
        assert r.status_code == 201, r.text
        made[scope] = r.json()["key"]
    assert len(set(made.values())) == 3
    assert keyed.post("/train", json={}, headers=bearer(made["write"])).status_code == 422
    assert keyed.get("/keys", headers=bearer(made["admin"])).status_code == 200
    assert_problem(keyed.get("/keys", headers=bearer(made["write"])), 403)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "read"}, "name"),
        ({"name": "", "scope": "read"}, "name"),
        ({"name": "n" * 256, "scope": "read"}, "name"),
        ({"name": 5, "scope": "read"}, "name"),
        ({"name": "ci"}, "scope"),
        ({"name": "ci", "scope": "root"}, "scope"),
        ({"name": "ci", "scope": "READ"}, "scope"),
        ({"name": "ci", "scope": "read", "key": "msv_chosen"}, "key"),
    ],
)
def test_key_creation_is_validated(keyed, engine, body, field):
    assert_problem(keyed.post("/keys", json=body, headers=bearer(ADMIN)), 422, field)
    assert key_rows(engine) == []


def test_keys_list_is_paginated_newest_first(keyed, engine):
    for i in range(5):
        make_key(engine, "read", f"k{i}")
    first = keyed.get("/keys", params={"limit": 2}, headers=bearer(ADMIN)).json()
    assert [k["name"] for k in first["items"]] == ["k4", "k3"]
    rest = keyed.get(
        "/keys", params={"limit": 10, "cursor": first["next_cursor"]}, headers=bearer(ADMIN)
    ).json()
    assert [k["name"] for k in rest["items"]] == ["k2", "k1", "k0"]
    assert rest["next_cursor"] is None


def test_keys_are_compared_in_constant_time(keyed, engine, monkeypatch):
    """The stored hash and the admin key's hash are compared with hmac.compare_digest."""
    secret = make_key(engine, "read")
    real = hmac.compare_digest
    calls: list[tuple] = []

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert keyed.get("/datasets", headers=bearer(secret)).status_code == 200
    digest = sha256(secret).encode()
    assert (digest, digest) in calls  # the row found by its hash, compared again
    assert (digest, sha256(ADMIN).encode()) in calls
    calls.clear()
    assert keyed.get("/datasets", headers=bearer(ADMIN)).status_code == 200
    assert (sha256(ADMIN).encode(), sha256(ADMIN).encode()) in calls


def test_the_admin_key_is_never_stored(keyed, engine):
    assert keyed.post("/keys", json={"name": "x", "scope": "read"}, headers=bearer(ADMIN))
    for row in key_rows(engine):
        values = [getattr(row, c.key) for c in ApiKey.__table__.columns]
        assert not any(isinstance(v, str) and (ADMIN in v or sha256(ADMIN) in v) for v in values)
    assert keyed.app.state.auth.admin_hash == sha256(ADMIN)


def test_admin_key_must_be_long(settings):
    from app.core.config import Settings

    with pytest.raises(ValueError, match="admin_key"):
        Settings(database_url=settings.database_url, admin_key="short", _env_file=None)


# --- when keys are required ----------------------------------------------------------------------


def test_auto_without_any_key_is_open(client):
    """The README's quick start: no key anywhere, the service answers without one."""
    assert client.get("/datasets").status_code == 200
    assert client.get("/keys").status_code == 200
    assert client.post("/train", json={}).status_code == 422


def test_auto_first_key_closes_a_running_service(client, engine):
    assert client.get("/datasets").status_code == 200
    created = time.monotonic()
    key = make_key(engine, "read")  # e.g. by `msvmav keys create` in another process
    # "no key yet" is trusted for OPEN_RECHECK_SECONDS, then the database is asked again
    closed = wait_for(lambda: client.get("/datasets").status_code == 401, timeout=5)
    assert closed and time.monotonic() - created <= OPEN_RECHECK_SECONDS + 1
    assert_problem(client.get("/datasets"), 401)
    assert client.get("/datasets", headers=bearer(key)).status_code == 200


def test_auto_first_key_created_over_http_closes_at_once(client):
    r = client.post("/keys", json={"name": "first", "scope": "admin"})
    assert r.status_code == 201, r.text
    assert_problem(client.get("/keys"), 401)
    assert client.get("/keys", headers=bearer(r.json()["key"])).status_code == 200


def test_revoking_every_key_does_not_reopen(settings, engine):
    """An attacker holding the only admin key who revokes it cannot open the service."""
    with TestClient(create_app(settings)) as c:
        r = c.post("/keys", json={"name": "only", "scope": "admin"})
        key, key_id = r.json()["key"], r.json()["id"]
        assert c.delete(f"/keys/{key_id}", headers=bearer(key)).status_code == 204
        assert_problem(c.get("/datasets"), 401)
        assert_problem(c.get("/datasets", headers=bearer(key)), 401)
    with TestClient(create_app(settings)) as c:  # a restart
        assert_problem(c.get("/datasets"), 401)
        assert_problem(c.post("/keys", json={"name": "again", "scope": "admin"}), 401)


def test_a_running_service_stays_closed_if_the_table_is_emptied(client, engine):
    make_key(engine, "read")
    assert_problem(client.get("/datasets"), 401)
    with engine.begin() as conn:
        conn.execute(ApiKey.__table__.delete())
    assert_problem(client.get("/datasets"), 401)


def test_admin_key_alone_closes_the_service(keyed, engine):
    assert key_rows(engine) == []
    assert_problem(keyed.get("/datasets"), 401)


def test_auth_off_needs_no_key_even_with_keys(settings, engine):
    make_key(engine, "admin")
    off = settings.model_copy(update={"auth": "off", "admin_key": SecretStr(ADMIN)})
    with TestClient(create_app(off)) as c:
        assert c.get("/datasets").status_code == 200
        assert c.delete("/datasets/999999").status_code == 404


def test_auth_on_without_keys_refuses_everyone(settings, engine):
    with TestClient(create_app(settings.model_copy(update={"auth": "on"}))) as c:
        assert_problem(c.get("/datasets"), 401)
        assert_problem(c.post("/keys", json={"name": "me", "scope": "admin"}), 401)
        assert c.get("/livez").status_code == 200
    assert key_rows(engine) == []


# --- OpenAPI / Swagger ---------------------------------------------------------------------------


def test_openapi_documents_the_bearer_scheme_and_401_403(keyed):
    schema = keyed.get("/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert list(schemes.values()) == [
        {**next(iter(schemes.values())), "type": "http", "scheme": "bearer"}
    ]
    (name,) = schemes
    n_ops = 0
    for path, item in schema["paths"].items():
        for method, op in item.items():
            n_ops += 1
            if path in OPEN_PATHS:
                assert "security" not in op, (method, path)
                continue
            assert op["security"] == [{name: []}], (method, path)
            # 403 only where a lower scope exists: every key has at least read.
            read_only = not path.startswith("/keys") and (
                method == "get"
                or path.startswith("/predict")
                or path.endswith(("/infer", "/invocations"))  # the protocols' predictions
                or path.endswith(("/evaluate", "/evaluate.png", "/evaluate.svg", "/explain"))
                or path == "/models/leaderboard"
            )
            assert ("403" in op["responses"]) is not read_only, (method, path)
            for code in ("401",) if read_only else ("401", "403"):
                content = op["responses"][code]["content"]
                assert list(content) == ["application/problem+json"], (method, path, code)
            assert "WWW-Authenticate" in op["responses"]["401"]["headers"]
    assert n_ops >= 25
    keys_post = schema["paths"]["/keys"]["post"]
    assert "Location" in keys_post["responses"]["201"]["headers"]


def test_documented_401_and_403_examples_are_the_real_answers(keyed, engine):
    """The OpenAPI examples of 401 and 403 have the type and title (and detail) of the answers
    the service really gives."""
    schema = keyed.get("/openapi.json").json()
    responses = schema["paths"]["/datasets"]["get"]["responses"]
    documented = responses["401"]["content"]["application/problem+json"]["example"]
    real = assert_problem(keyed.get("/datasets", headers=bearer("msv_" + "x" * 43)), 401)
    for field in ("type", "title", "status", "detail"):
        assert documented[field] == real[field], field
    responses = schema["paths"]["/keys"]["post"]["responses"]
    documented = responses["403"]["content"]["application/problem+json"]["example"]
    real = assert_problem(keyed.post("/keys", json={"name": "x", "scope": "read"},
                                     headers=bearer(make_key(engine, "write"))), 403)
    for field in ("type", "title", "status", "detail", "required_scope", "scope"):
        assert documented[field] == real[field], field


def test_read_methods_are_the_methods_routes_answer_to_read(keyed, engine):
    """security.READ_METHODS is GET and HEAD: no route answers OPTIONS (405 for any key)."""
    assert {"GET", "HEAD"} == security.READ_METHODS
    read = bearer(make_key(engine, "read"))
    assert keyed.get("/datasets", headers=read).status_code == 200
    assert keyed.options("/datasets", headers=read).status_code == 405


def test_swagger_ui_keeps_the_authorization(keyed):
    assert '"persistAuthorization": true' in keyed.get("/docs").text


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_keys_create_list_revoke(settings, engine, cli_env, capsys):
    url = settings.database_url
    assert (
        cli.main(["--database-url", url, "keys", "create", "--scope", "write", "--name", "ci"]) == 0
    )
    out = capsys.readouterr().out
    secret = out.strip()
    assert out == secret + "\n" and KEY_PATTERN.match(secret), out  # the key alone
    (row,) = key_rows(engine)
    assert (row.name, row.scope, row.key_hash) == ("ci", "write", sha256(secret))

    # (the app reads the key on every request, so the CLI's revocation counts at once; a
    # longer MSVMAV_SERVE_RECHECK_SECONDS's bound: tests/app/test_serving_recheck.py)
    strict = settings.model_copy(update={"serve_recheck_seconds": 0.0})
    with TestClient(create_app(strict)) as c:
        assert c.delete("/datasets/999999", headers=bearer(secret)).status_code == 404
        assert_problem(c.get("/keys", headers=bearer(secret)), 403)

        assert cli.main(["--database-url", url, "keys", "list"]) == 0
        listing = capsys.readouterr().out
        assert "ci" in listing and secret[:12] in listing and secret not in listing
        assert sha256(secret) not in listing

        assert cli.main(["--database-url", url, "keys", "revoke", str(row.id)]) == 0
        assert_problem(c.get("/datasets", headers=bearer(secret)), 401)
    assert cli.main(["--database-url", url, "keys", "revoke", "999999"]) == 1
    assert "999999 not found" in capsys.readouterr().err


def test_cli_keys_create_checks_its_arguments(settings, engine, cli_env, capsys):
    base = ["--database-url", settings.database_url, "keys", "create"]
    for args in (["--scope", "root", "--name", "x"], ["--scope", "read"], ["--name", "x"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(base + args)
        assert exc.value.code == 2
    assert key_rows(engine) == []


# --- msvmav serve --------------------------------------------------------------------------------


@pytest.fixture
def served(monkeypatch) -> Iterator[list[tuple]]:
    """uvicorn.run replaced by a recorder: the test sees what `serve` would have served, and a
    serve that wrongly starts does not block the test."""
    import uvicorn

    calls: list[tuple] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield calls
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def serve(url: str, host: str) -> int:
    return cli.main(["--database-url", url, "serve", "--host", host, "--workers", "0"])


def test_serve_refuses_a_public_host_without_a_key(settings, engine, cli_env, served, capsys):
    assert serve(settings.database_url, "0.0.0.0") == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("msvmav serve:")]
    assert len(err) == 1, err  # one line (the other stderr lines are the log's)
    assert "msvmav keys create --scope admin --name me" in err[0]
    assert "MSVMAV_AUTH=off" in err[0]
    assert served == []


def test_serve_refuses_when_every_key_is_revoked(settings, engine, cli_env, served, capsys):
    make_key(engine, "admin")
    with Session(engine) as session:
        service.revoke(session, key_rows(engine)[0].id)
    assert serve(settings.database_url, "::") == 2
    assert served == []


def test_serve_public_host_with_a_key_requires_keys(settings, engine, cli_env, served):
    key = make_key(engine, "read")
    assert serve(settings.database_url, "0.0.0.0") == 0
    ((app, kw),) = served
    assert kw["host"] == "0.0.0.0" and app.state.auth.mode == "on"
    with TestClient(app) as c:
        assert_problem(c.get("/datasets"), 401)
        assert c.get("/datasets", headers=bearer(key)).status_code == 200


def test_serve_public_host_with_the_admin_key(settings, engine, cli_env, served, monkeypatch):
    monkeypatch.setenv("MSVMAV_ADMIN_KEY", ADMIN)
    assert serve(settings.database_url, "0.0.0.0") == 0
    ((app, _kw),) = served
    with TestClient(app) as c:
        assert_problem(c.get("/datasets"), 401)
        assert c.get("/datasets", headers=bearer(ADMIN)).status_code == 200


def test_serve_public_host_with_auth_off(settings, engine, cli_env, served, monkeypatch):
    monkeypatch.setenv("MSVMAV_AUTH", "off")
    assert serve(settings.database_url, "0.0.0.0") == 0
    ((app, _kw),) = served
    with TestClient(app) as c:
        assert c.get("/datasets").status_code == 200


def test_serve_leaves_the_signal_handlers_as_it_found_them(settings, engine, cli_env, served):
    """serve catches SIGTERM/SIGINT while it runs; a process that goes on afterwards (and the
    children it forks) must not inherit that handler."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    assert serve(settings.database_url, "127.0.0.1") == 0 and len(served) == 1
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_serve_loopback_without_a_key_stays_open(settings, engine, cli_env, served):
    assert serve(settings.database_url, "127.0.0.1") == 0
    ((app, _kw),) = served
    assert app.state.auth.mode == "auto"
    with TestClient(app) as c:
        assert c.get("/datasets").status_code == 200
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ApiKey)) == 0


UNREACHABLE_DB = "postgresql+psycopg://postgres@127.0.0.1:1/x"


def test_serve_public_host_reports_an_unreachable_database(cli_env, served, capsys):
    """A database that cannot be reached is that error ("cannot use the database"), not the
    refusal's "create a key" advice."""
    with pytest.raises(OperationalError):
        serve_settings(Settings(database_url=UNREACHABLE_DB, _env_file=None), "0.0.0.0")
    assert serve(UNREACHABLE_DB, "0.0.0.0") == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("msvmav:")]
    assert len(err) == 1 and "cannot use the database" in err[0], err
    assert "keys create" not in err[0]
    assert served == []


def test_serve_public_host_refuses_an_unmigrated_database(cli_env, tmp_path):
    """No api_keys table (never migrated): no key, so the refusal."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    with pytest.raises(ServeRefused, match="keys create"):
        serve_settings(Settings(database_url=url, _env_file=None), "0.0.0.0")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.org", False),
        ("", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback
