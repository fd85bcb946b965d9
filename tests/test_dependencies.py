"""Every third-party package the code imports at module level is declared: the service's
(``app``, ``solver``, ``migrations``) in pyproject.toml's dependencies, the client's in
msvmav_client/pyproject.toml (httpx only). Imports inside functions are optional features
(onnx, dask, pandas for a DataFrame) declared as extras. Whether the declared floors are true
is .ci/lowest's job (the lowest versions installed and the smoke tier run on them)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"app", "solver", "msvmav_client", "migrations", "tests"}
# Modules another declared distribution ships and pins: pydantic pins its pydantic-core exactly.
PART_OF = {"pydantic-core": "pydantic"}


def _module_level_imports(package: Path) -> dict[str, str]:
    """{top-level module: a file importing it} for imports outside functions and classes."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def _declared(pyproject: Path) -> set[str]:
    """The distributions a pyproject.toml declares: its dependencies and its feature extras' (an
    extra's package is imported at module level only by modules that are themselves imported
    when the feature is used: app.export.onnx_graph for onnx)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    requirements = [*project.get("dependencies", [])]
    for name, extra in project.get("optional-dependencies", {}).items():
        if name not in ("test", "bench"):  # the tests' and benchmarks' own tools
            requirements += extra
    return {_normal(re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0]) for d in requirements}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _undeclared(packages: list[str], pyproject: Path) -> list[str]:
    distributions = packages_distributions()
    declared = _declared(pyproject)
    missing = []
    for package in packages:
        for module, where in _module_level_imports(ROOT / package).items():
            names = {_normal(d) for d in distributions.get(module, [module])}
            names |= {PART_OF[n] for n in names if n in PART_OF}
            if not names & declared:
                missing.append(f"{module} (imported by {where}; distribution {sorted(names)})")
    return missing


def test_the_service_declares_what_it_imports():
    assert _undeclared(["app", "solver", "migrations"], ROOT / "pyproject.toml") == []


def test_the_client_declares_what_it_imports():
    assert _declared(ROOT / "msvmav_client" / "pyproject.toml") == {"httpx"}
    assert _undeclared(["msvmav_client"], ROOT / "msvmav_client" / "pyproject.toml") == []
