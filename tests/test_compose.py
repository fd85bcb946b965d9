"""docker-compose.yml and the image's entrypoint as the README uses them: ``docker compose up -d
--build --wait`` needs no variable (the entrypoint makes an admin key at the first start and
prints it), the API is published on the host's loopback unless MSVMAV_BIND says otherwise,
``.env`` (where docs/docker.md puts the key) is ignored by git, and docs/docker.md shows the
migration head. The last test runs the stack in a real Docker engine: only with
MSVMAV_TEST_COMPOSE=1 (it builds the image: minutes)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from tests.live_server import ROOT, free_port

COMPOSE = ROOT / "docker-compose.yml"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
# A guard against a hung entrypoint only, not a speed limit: each ``msvmav`` process imports the
# service (numpy, scikit-learn, FastAPI), which took over a minute on the loaded 2-core machine
# without byte-code caches (PYTHONDONTWRITEBYTECODE), so 120 s failed runs that were working.
HANG_GUARD_S = 900
VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` (ValueError)."""

    def one(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if env.get(name):
            return env[name]
        if op == "?":
            raise ValueError(f"{name}: {arg}")
        return arg if op == "-" else ""

    return VARIABLE.sub(one, text)


def api_service() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]["api"]


def test_compose_needs_no_variable():
    """Every ``${…}`` of the file resolves with an empty environment (no ``:?`` error)."""
    interpolate(COMPOSE.read_text(), {})


def test_the_api_is_published_on_loopback_unless_told_otherwise():
    (ports,) = api_service()["ports"]
    assert interpolate(ports, {}) == "127.0.0.1:8000:8000"
    assert interpolate(ports, {"MSVMAV_BIND": "0.0.0.0", "API_PORT": "9000"}) == "0.0.0.0:9000:8000"


def test_env_file_is_ignored_by_git():
    checked = subprocess.run(["git", "check-ignore", "--no-index", ".env"], cwd=ROOT,
                             capture_output=True, text=True, check=False)
    assert checked.stdout.strip() == ".env", checked


def test_docker_docs_show_the_migration_head():
    head = max(p.name.split("_")[3] for p in (ROOT / "migrations" / "versions").glob("*_*.py"))
    quick_start = (ROOT / "docs" / "docker.md").read_text().split("## What runs")[0]
    assert re.findall(r'"migrations":"(\d+)"', quick_start) == [head]


def run_entrypoint(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "MSVMAV_ADMIN_KEY"} | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "MSVMAV_DATABASE_URL": f"sqlite:///{tmp_path / 'first.db'}",
        **env,
    }
    return subprocess.run(["sh", str(ENTRYPOINT), *args], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=HANG_GUARD_S, check=True)


def test_entrypoint_makes_an_admin_key_at_the_first_start_only(tmp_path):
    """``serve`` on a database without keys and no MSVMAV_ADMIN_KEY (compose's empty default):
    an admin key is created and printed once; the next start creates none."""
    first = run_entrypoint(tmp_path, "serve", "--help", MSVMAV_ADMIN_KEY="")
    (key,) = re.findall(r"^msvmav: admin key: (msv_\S+)$", first.stdout, re.M)
    assert "usage: msvmav serve" in first.stdout  # then the command itself ran
    listed = run_entrypoint(tmp_path, "keys", "list").stdout.splitlines()
    assert len(listed) == 2 and "\tadmin\t" in listed[1] and key[:12] in listed[1]
    again = run_entrypoint(tmp_path, "serve", "--help", MSVMAV_ADMIN_KEY="")
    assert "admin key" not in again.stdout
    assert len(run_entrypoint(tmp_path, "keys", "list").stdout.splitlines()) == 2


def test_entrypoint_leaves_a_given_key_and_other_commands_alone(tmp_path):
    given = run_entrypoint(tmp_path, "serve", "--help", MSVMAV_ADMIN_KEY="k" * 32)
    worker = run_entrypoint(tmp_path, "worker", "--help")
    assert "admin key" not in given.stdout + worker.stdout
    assert not (tmp_path / "first.db").exists()  # nothing was migrated either


def _docker(*args: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          **kwargs)


@pytest.mark.skipif(os.environ.get("MSVMAV_TEST_COMPOSE") != "1",
                    reason="builds and runs the compose stack: set MSVMAV_TEST_COMPOSE=1")
def test_compose_up_as_the_readme_says(tmp_path):
    """``docker compose up -d --build --wait`` with no variable set (a project of its own and a
    free port): the API answers on 127.0.0.1 only, with the key its log printed."""
    assert shutil.which("docker"), "docker is not installed"
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if k != "MSVMAV_ADMIN_KEY"}
    env |= {"COMPOSE_PROJECT_NAME": f"msvmav-test-{uuid.uuid4().hex[:8]}", "API_PORT": port}
    compose = ("compose", "-f", str(COMPOSE))
    try:
        up = _docker(*compose, "up", "-d", "--build", "--wait", timeout=1500, env=env, cwd=ROOT)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        logs = _docker(*compose, "logs", "api", env=env, cwd=ROOT).stdout
        (key,) = re.findall(r"msvmav: admin key: (msv_\S+)", logs)
        published = _docker(*compose, "port", "api", "8000", env=env, cwd=ROOT).stdout.strip()
        assert published == f"127.0.0.1:{port}"
        request = urllib.request.Request(f"http://127.0.0.1:{port}/keys",
                                         headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(request, timeout=10) as r:
            assert [k["scope"] for k in json.load(r)["items"]] == ["admin"]
    finally:
        _docker(*compose, "down", "-v", timeout=300, env=env, cwd=ROOT)
