"""Issue 15 (faults), the request-input points, on SQLite and on PostgreSQL when
TEST_DATABASE_URL is set: NUL characters (point 5), deeply nested JSON (point 6), and point 10's
duplicate Authorization headers, Host echoed into a redirect, HTML in table.md and the route of
errors answered by the auth middleware. The header timeout is in test_faults_header_timeout.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from pydantic import SecretStr
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.auth.orm import ApiKey
from app.core.problems import MAX_JSON_DEPTH, Problem
from app.core.validation import check_json
from app.datasets.orm import Dataset
from app.experiments.table_cells import markdown_cell
from app.jobs.orm import Job
from app.main import create_app
from tests.app.support import assert_problem, blobs, run_jobs, to_csv, upload

ADMIN = "msv_" + "A" * 43


def rows(engine, table) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(table))


def multipart(filename: bytes, content: bytes, **fields: bytes) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body written byte by byte (httpx percent-encodes a NUL in a file
    name, so it would never reach the server as a NUL)."""
    parts = [
        b'--BB\r\nContent-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: text/csv\r\n\r\n'
        + content
        + b"\r\n"
    ]
    for name, value in fields.items():
        parts.append(
            b'--BB\r\nContent-Disposition: form-data; name="' + name.encode() + b'"\r\n\r\n'
        )
        parts.append(value + b"\r\n")
    body = b"".join(parts) + b"--BB--\r\n"
    return body, {"content-type": "multipart/form-data; boundary=BB"}


def nested(levels: int, leaf: object = 1) -> object:
    """``{"a": {"a": ... leaf}}`` with ``levels`` objects."""
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def post_raw(client: TestClient, path: str, body: str):
    """A JSON body as text (the test's own serialisation: no Python recursion limit)."""
    return client.post(path, content=body.encode(), headers={"content-type": "application/json"})


def deep_text(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


# -- point 5: NUL in text that reaches the database --------------------------------------------
def test_nul_in_an_upload_file_name_is_a_422_and_stores_nothing(client, engine):
    body, headers = multipart(b"wd\x00bc.csv", to_csv(*blobs(n=20)))
    assert_problem(client.post("/datasets", content=body, headers=headers), 422, "file")
    assert rows(engine, Dataset) == 0


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("name", b"wd\x00bc", "name"),
        ("label", b"y\x00", "label"),
        ("format", b"csv\x00", "format"),
        ("delimiter", b",\x00", "delimiter"),
        ("drop", b"x0\x00", "drop[0]"),
    ],
)
def test_nul_in_an_upload_form_field_is_a_422_naming_it(client, engine, field, value, named):
    body, headers = multipart(b"data.csv", to_csv(*blobs(n=20)), **{field: value})
    problem = assert_problem(client.post("/datasets", content=body, headers=headers), 422, named)
    assert "NUL" in problem["detail"]
    assert rows(engine, Dataset) == 0


def test_nul_in_a_key_name_is_a_422_and_stores_nothing(client, engine):
    r = client.post("/keys", json={"name": "ci\x00", "scope": "read"})
    assert "NUL" in assert_problem(r, 422, "name")["detail"]
    assert rows(engine, ApiKey) == 0


@pytest.mark.parametrize(
    ("path", "extra", "named"),
    [
        ("/train", {"algorithm": "svm", "params": {"C\x00": 1}}, "params.C\\u0000"),
        ("/train", {"algorithm": "svm", "params": {"kernel": "rbf\x00"}}, "params.kernel"),
        ("/train", {"search": {"grid": {"alpha": [1, "x\x00"]}}}, "search.grid.alpha[1]"),
        ("/experiments", {"params": {"svm": {"C": "\x00"}}}, "params.svm.C"),
        ("/experiments", {"grid": {"svm\x00": {"C": [1]}}}, "grid.svm\\u0000"),
    ],
)
def test_nul_anywhere_in_a_json_body_is_a_422_naming_it(client, engine, path, extra, named):
    ds = upload(client, to_csv(*blobs(n=20)))
    key = "dataset_ids" if path == "/experiments" else "dataset_id"
    body = {key: [ds["id"]] if path == "/experiments" else ds["id"], **extra}
    problem = assert_problem(client.post(path, json=body), 422, named)
    assert "NUL" in problem["detail"]
    assert rows(engine, Job) == 0


def test_nul_in_a_query_parameter_is_a_422_naming_it(client):
    problem = assert_problem(client.get("/datasets", params={"cursor": "a\x00"}), 422, "cursor")
    assert "NUL" in problem["detail"]


# -- point 6: JSON nested deeper than MAX_JSON_DEPTH -------------------------------------------
@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 254, 255, 600, 1000, 5000])
@pytest.mark.parametrize(
    ("path", "wrap", "prefix"),
    [
        ("/train", lambda ds, v: f'{{"dataset_id": {ds}, "params": {v}}}', "params"),
        (
            "/train",
            lambda ds, v: f'{{"dataset_id": {ds}, "search": {{"grid": {v}}}}}',
            "search.grid",
        ),
        ("/experiments", lambda ds, v: f'{{"dataset_ids": [{ds}], "params": {v}}}', "params"),
    ],
)
def test_json_nested_too_deep_is_a_422_naming_the_path(client, engine, levels, path, wrap, prefix):
    ds = upload(client, to_csv(*blobs(n=20)))
    r = post_raw(client, path, wrap(ds["id"], deep_text(levels)))
    problem = assert_problem(r, 422)
    assert f"deeper than {MAX_JSON_DEPTH} levels" in problem["detail"], problem
    (error,) = problem["errors"]
    if levels < 900:  # parsed: the path where it got too deep, cut there
        depth_of_prefix = 1 + prefix.count(".") + 1  # the body, then each key of the prefix
        steps = MAX_JSON_DEPTH + 1 - depth_of_prefix
        assert error["field"] == prefix + ".a" * steps
        assert error["loc"] == ["body", *prefix.split("."), *["a"] * steps]
    else:  # too deep for the JSON parser itself
        assert error["field"] == "body"
    assert rows(engine, Job) == 0


def test_json_at_the_depth_limit_reaches_the_usual_validation(client):
    ds = upload(client, to_csv(*blobs(n=20)))
    # the body (1), params (2) and 30 more objects: 32 levels
    body = {"dataset_id": ds["id"], "algorithm": "svm", "params": nested(30)}
    problem = assert_problem(client.post("/train", json=body), 422, "params.a")
    assert "unknown parameter" in problem["detail"]


def test_deep_json_is_refused_on_every_route_with_a_body(client):
    deep = deep_text(300)
    for path in ("/predict", "/keys", "/experiments", "/train"):
        assert "deeper than" in assert_problem(post_raw(client, path, deep), 422)["detail"]
    r = post_raw(client, "/predict", '{"model_id": 1, "instances": [' + "[" * 40 + "]" * 41 + "}")
    assert assert_problem(r, 422)["errors"][0]["loc"][:3] == ["body", "instances", 0]


def _refusal(value: object, nul: bool = True) -> list | None:
    try:
        check_json(value, nul=nul)
    except Problem as problem:
        return problem.errors[0]["loc"]
    return None


def test_check_json_finds_the_one_bad_row_among_many():
    """The walk skips rows of scalars in bulk; a single deep or NUL row is still found."""
    rows = [{"a": 1.0, "b": "x"} for _ in range(1000)]
    assert _refusal({"instances": rows}) is None
    assert _refusal({"instances": [[1, 2]] * 1000 + [[nested(40)]]})[:4] == [
        "body", "instances", 1000, 0
    ]
    rows[700] = {"a": 1.0, "b": "x\x00"}
    assert _refusal({"instances": rows}) == ["body", "instances", 700, "b"]
    assert _refusal({"instances": rows}, nul=False) is None  # no escaped NUL in the raw body
    rows[700] = {"a\x00": 1.0}
    assert _refusal({"instances": rows}) == ["body", "instances", 700, "a\\u0000"]
    # lists of scalars at the limit: level 32 is accepted, level 33 refused
    at_limit: object = [1]
    for _ in range(MAX_JSON_DEPTH - 1):
        at_limit = [at_limit]
    assert _refusal(at_limit) is None
    assert _refusal([at_limit]) == ["body", *[0] * MAX_JSON_DEPTH]


# -- point 10: duplicate Authorization headers -------------------------------------------------
@pytest.fixture
def keyed(settings, engine) -> Iterator[TestClient]:
    """An app with MSVMAV_ADMIN_KEY set: keys are required."""
    with TestClient(create_app(settings.model_copy(update={"admin_key": SecretStr(ADMIN)}))) as c:
        yield c


def two_authorizations(first: str, second: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]


@pytest.mark.parametrize(
    ("first", "second"),
    [(ADMIN, "msv_" + "B" * 43), ("msv_" + "B" * 43, ADMIN), (ADMIN, ADMIN)],
)
def test_two_authorization_headers_are_a_400_with_keys(keyed, first, second):
    r = keyed.get("/datasets", headers=two_authorizations(first, second))
    assert "Authorization header was sent 2 times" in assert_problem(r, 400)["detail"]
    assert keyed.get("/datasets", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200


def test_two_authorization_headers_are_a_400_without_keys(client):
    r = client.get("/datasets", headers=two_authorizations("a", "b"))
    assert_problem(r, 400)
    assert client.get("/livez", headers=two_authorizations("a", "b")).status_code == 200  # open


# -- point 10: no Host echoed into a redirect --------------------------------------------------
@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/datasets/", "/datasets"),
        ("/datasets/?limit=5&cursor=x", "/datasets?limit=5&cursor=x"),
        ("/docs/", "/docs"),
        ("/jobs/1/", "/jobs/1"),
    ],
)
def test_trailing_slash_redirect_is_relative(client, path, location):
    r = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 307, r.text
    assert r.headers["location"] == location
    assert "evil.example" not in r.text


def test_redirect_targets_still_answer_and_other_hosts_are_never_named(client):
    assert client.get("/docs/", follow_redirects=True).status_code == 200  # Swagger UI
    assert client.get("/datasets/", follow_redirects=True).json()["items"] == []
    # a path that would be read as another host is not redirected there: the client sends it
    # as "/" of that host, which the service answers with its own relative /ui (the web
    # interface's redirect), never a Location naming the host
    r = client.get("//evil.example/", headers={"Host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui"
    r = client.get("/datasets//evil.example/", headers={"Host": "evil.example"},
                   follow_redirects=False)
    assert "evil" not in r.headers.get("location", "")


# -- point 10: table.md renders no HTML nor links from a data set's name -----------------------
class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text += data


HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[click](http://evil.example)",
    "![i](http://evil.example/i.png)",
    "`code` &amp; \\| a\\",
]


def rendered(markdown: str) -> _Tags:
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    tags = _Tags()
    tags.feed(html)
    return tags


@pytest.mark.parametrize("name", HOSTILE)
def test_markdown_cell_renders_as_the_literal_text(name):
    tags = rendered(f"| dataset |\n|---|\n| {markdown_cell(name)} |\n")
    assert set(tags.tags) == {"table", "thead", "tr", "th", "tbody", "td"}
    assert tags.text.split("dataset", 1)[1].strip() == name


def test_table_md_shows_hostile_names_as_text(client, worker):
    ids = [
        upload(client, to_csv(*blobs(n=40, seed=i)), name=name)["id"]
        for i, name in enumerate(HOSTILE)
    ]
    body = {
        "dataset_ids": ids,
        "algorithms": ["msvmav", "svm"],
        "splits": 1,
        "cv": 2,
        "grid": {"msvmav": {"alpha": [1], "beta": [1]}, "svm": {"C": [1]}},
        "params": {"msvmav": {"max_iter": 10}},
    }
    r = client.post("/experiments", json=body)
    assert r.status_code == 202, r.text
    assert run_jobs(worker) == ["succeeded"]
    r = client.get(f"/experiments/{r.json()['id']}/table.md")
    assert r.headers["x-content-type-options"] == "nosniff"
    tags = rendered(r.text)
    assert set(tags.tags) <= {"table", "thead", "tr", "th", "tbody", "td", "p"}, tags.tags
    for name in HOSTILE:
        assert name in tags.text


# -- point 10: errors answered by the auth middleware are counted under their route -----------
def test_auth_middleware_answers_are_counted_under_the_route(keyed, engine):
    assert keyed.get("/datasets/5").status_code == 401  # no key
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE api_keys RENAME TO api_keys_away"))
    try:  # a real fault while the middleware looks the key up
        broken = TestClient(keyed.app, raise_server_exceptions=False)
        r = broken.get("/datasets/5", headers={"Authorization": "Bearer msv_" + "C" * 43})
        assert r.status_code >= 500, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
    finally:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE api_keys_away RENAME TO api_keys"))
    lines = "\n".join(keyed.app.state.metrics.render())
    route = 'method="GET",route="/datasets/{dataset_id}"'
    assert f'msvmav_http_requests_total{{{route},status="401"}} 1' in lines
    assert re.search(rf'msvmav_http_requests_total\{{{re.escape(route)},status="5\d\d"}} 1', lines)
    assert 'route="<unmatched>"' not in lines


def test_an_unknown_path_is_still_unmatched(client):
    assert client.get("/no/such/path").status_code == 404
    assert client.post("/datasets/1").status_code == 405  # the path's route, another method
    lines = "\n".join(client.app.state.metrics.render())
    assert 'msvmav_http_requests_total{method="GET",route="<unmatched>",status="404"} 1' in lines
    assert 'route="/datasets/{dataset_id}",status="405"' in lines

