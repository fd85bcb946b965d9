"""The web interface's server side (app.ui) and the dataset profile it shows: page shells are
open but hold no data, carry a self-only Content-Security-Policy and escape what they echo;
/ui-api needs a key and names its scope; the overview's counts and the profile's numbers
match independent computations; the assets ship as package data."""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.datasets.orm import Dataset
from app.jobs.orm import Job
from app.main import create_app
from app.models.orm import Model
from tests.app.auth_support import bearer, make_key
from tests.app.support import assert_problem, run_jobs, submit, to_csv, upload

ADMIN = "ui-admin-key-from-the-environment-0123456789"
PAGES = ["/ui", "/ui/datasets", "/ui/datasets/3", "/ui/jobs", "/ui/jobs/9", "/ui/models",
         "/ui/models/1", "/ui/registry", "/ui/registry/wdbc", "/ui/monitoring",
         "/ui/monitoring/wdbc@production", "/ui/experiments", "/ui/experiments/2", "/ui/keys"]


@pytest.fixture
def keyed(settings, engine) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"admin_key": SecretStr(ADMIN)}))
    with TestClient(app) as c:
        yield c


def test_root_redirects_to_the_interface(keyed):
    r = keyed.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui"


def test_the_open_root_opens_nothing_below_it(keyed):
    """"/" is open (the redirect) but is no prefix: an anonymous request elsewhere is turned
    away by the key check before its body is read (401, not the 422 of its bad JSON)."""
    r = keyed.post("/train", content=b"{not json", headers={"content-type": "application/json"})
    assert_problem(r, 401)
    assert_problem(keyed.get("/ui-api/overview"), 401)
    assert_problem(keyed.get("/ui-apix"), 401)


@pytest.mark.parametrize("path", PAGES)
def test_pages_are_open_shells_with_a_self_only_policy(keyed, path):
    r = keyed.get(path)  # no key: the shell, which holds no data
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'none'"
    assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["connect-src"] == "'self'" and csp["img-src"] == "'self' blob:"
    assert csp["frame-ancestors"] == "'none'"
    assert "<script>" not in r.text and " style=" not in r.text  # nothing inline
    scripts = [s.split('"')[0] for s in r.text.split('<script src="')[1:]]
    assert scripts and all(s.startswith("/ui/static/") for s in scripts)
    for src in scripts:  # served, without a key
        asset = keyed.get(src)
        assert asset.status_code == 200 and "javascript" in asset.headers["content-type"]


def test_unknown_pages_are_404_problems(keyed):
    assert_problem(keyed.get("/ui/nothing"), 404)
    assert_problem(keyed.get("/ui/keys/1"), 404)  # the keys page has no detail page


def test_the_echoed_ident_is_escaped(keyed):
    r = keyed.get('/ui/models/"><img src=x onerror=alert(1)>')
    assert r.status_code == 200
    assert "<img src=x" not in r.text and "&lt;img src=x onerror=alert(1)&gt;" in r.text


def test_ui_api_needs_a_key_and_names_its_scope(keyed, engine):
    assert_problem(keyed.get("/ui-api/session"), 401)
    assert_problem(keyed.get("/ui-api/overview"), 401)
    for scope in ("read", "write", "admin"):
        key = make_key(engine, scope, name=f"{scope} person")
        r = keyed.get("/ui-api/session", headers=bearer(key))
        assert r.json() == {"auth_required": True, "name": f"{scope} person", "scope": scope}
        assert keyed.get("/ui-api/overview", headers=bearer(key)).status_code == 200
    r = keyed.get("/ui-api/session", headers=bearer(ADMIN))
    assert r.json()["scope"] == "admin"


def test_session_probe_is_open_and_answers_200_whatever_the_key(keyed, engine, client):
    """/ui/session: a page asks it before signing in, so no 401 lands in the console; it says
    what /ui-api/session's 200 or 401 says, no more."""
    assert client.get("/ui/session").json() == {  # an open service (no key exists yet)
        "authenticated": True, "auth_required": False, "name": None, "scope": "admin",
        "detail": None}
    r = keyed.get("/ui/session")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert r.json()["authenticated"] is False and r.json()["auth_required"] is True
    assert r.json()["name"] is None and "key is required" in r.json()["detail"]
    wrong = keyed.get("/ui/session", headers=bearer("msv_not-a-key-0123456789abcdef"))
    assert wrong.status_code == 200 and wrong.json()["detail"] == "invalid or revoked API key"
    key = make_key(engine, "write", name="writer")
    assert keyed.get("/ui/session", headers=bearer(key)).json() == {
        "authenticated": True, "auth_required": True, "name": "writer", "scope": "write",
        "detail": None}
    icon = keyed.get("/ui/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert '<link rel="icon" href="/ui/favicon.svg"' in keyed.get("/ui").text


def test_open_service_acts_as_admin(client):
    assert client.get("/ui-api/session").json() == {
        "auth_required": False, "name": None, "scope": "admin"}


def test_overview_counts_match_the_tables(client, worker, engine):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = np.where(X[:, 0] > 0, "pos", "neg")
    ds = upload(client, to_csv(X, y))
    submit(client, ds["id"], max_iter=20)
    assert run_jobs(worker) == ["succeeded"]
    submit(client, ds["id"], max_iter=20)  # stays queued
    o = client.get("/ui-api/overview").json()
    with Session(engine) as s:
        assert o["datasets"] == s.scalar(select(func.count(Dataset.id))) == 1
        assert o["models"] == s.scalar(select(func.count(Model.id))) == 1
        statuses = dict(s.execute(select(Job.status, func.count()).group_by(Job.status)).all())
    assert o["jobs"]["succeeded"] == statuses["succeeded"] == 1
    assert o["queue_length"] == o["jobs"]["queued"] == statuses["queued"] == 1
    assert o["workers_alive"] == 0 and o["registered_models"] == 0 and o["experiments"] == 0


def test_dataset_profile_matches_numpy(client):
    rng = np.random.default_rng(2)
    num = rng.normal(size=50).round(2)
    num[[3, 7]] = np.nan  # dropped with missing=drop
    colour = rng.choice(["red", "green", "blue"], size=50, p=[0.5, 0.3, 0.2])
    label = np.where(rng.random(50) > 0.4, "yes", "no")
    lines = ["x,colour,id,label"] + [
        f"{'' if np.isnan(v) else v},{c},{i},{lab}"
        for i, (v, c, lab) in enumerate(zip(num, colour, label, strict=True))
    ]
    ds = upload(client, ("\n".join(lines) + "\n").encode(), label="label", drop="id",
                missing="drop")
    p = client.get(f"/datasets/{ds['id']}/profile").json()
    keep = ~np.isnan(num)
    x, c, lab = num[keep], colour[keep], label[keep]
    assert p["rows_profiled"] == p["n_rows"] == keep.sum() == 48
    by_name = {col["name"]: col for col in p["columns"]}
    assert set(by_name) == {"x", "colour"}  # the dropped column is not a feature
    assert by_name["x"]["kind"] == "numeric" and by_name["x"]["missing"] == 0
    assert by_name["x"]["distinct"] == len(np.unique(x))
    assert by_name["x"]["min"] == pytest.approx(x.min())
    assert by_name["x"]["max"] == pytest.approx(x.max())
    assert by_name["x"]["mean"] == pytest.approx(x.mean())
    values, counts = np.unique(c, return_counts=True)
    top = {t["value"]: t["count"] for t in by_name["colour"]["top"]}
    assert top == dict(zip(values.tolist(), counts.tolist(), strict=True))
    assert by_name["colour"]["distinct"] == len(values) and by_name["colour"]["missing"] == 0
    classes, class_counts = np.unique(lab, return_counts=True)
    assert p["label"] == {"name": "label", "classes": classes.tolist(),
                          "counts": class_counts.tolist()}
    assert p["preview"]["labels"] == lab[:10].tolist()
    first = p["preview"]["rows"][0]
    assert first[p["preview"]["feature_names"].index("x")] == pytest.approx(x[0])


def test_dataset_profile_of_an_unknown_dataset_is_404(client):
    assert_problem(client.get("/datasets/999/profile"), 404)


def test_assets_ship_as_package_data():
    """What ``pip install`` puts beside app.ui (pyproject's package-data): every file the
    templates name."""
    root = resources.files("app.ui")
    names = {"templates/page.html", "static/ui.js", "static/ui.css"} | {
        f"static/pages/{p}.js" for p in ("overview", "datasets", "jobs", "models", "registry",
                                         "monitoring", "experiments", "keys")}
    for name in names:
        assert root.joinpath(name).is_file(), name


def test_every_asset_is_declared_as_package_data():
    """A new asset not matched by pyproject's package-data globs would be missing from a
    wheel (``pip install .``) though present in a checkout."""
    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["app.ui"]
    ui = root / "app" / "ui"
    assets = [p.relative_to(ui) for p in ui.rglob("*")
              if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert len(assets) >= 11
    for asset in assets:
        # setuptools' globs do not cross directories: compare directory and name apart
        assert any(
            asset.parent == Path(g).parent and fnmatch.fnmatch(asset.name, Path(g).name)
            for g in globs
        ), asset


def test_model_versions_name_each_registered_version(client, worker):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    ds = upload(client, to_csv(X, np.where(X[:, 0] > 0, "a", "b")))
    job = submit(client, ds["id"], max_iter=10)
    assert run_jobs(worker) == ["succeeded"]
    model = client.get(f"/jobs/{job['id']}").json()["model_id"]
    assert client.get(f"/ui-api/models/{model}/versions").json() == {"versions": []}
    assert_problem(client.get(f"/ui-api/models/{model + 1}/versions"), 404)
    for name in ("zeta", "alpha"):
        assert client.post("/registered-models", json={"name": name}).status_code == 201
        r = client.post(f"/registered-models/{name}/versions", json={"model_id": model})
        assert r.status_code == 201
    assert client.get(f"/ui-api/models/{model}/versions").json() == {"versions": [
        {"name": "alpha", "version": 1}, {"name": "zeta", "version": 1}]}
