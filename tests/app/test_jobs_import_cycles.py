"""No import cycle among the app's modules (module-level imports, as Python runs them), and the
worker reaches job runners only through the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import app
from tests.test_structure import find_cycle  # one cycle finder for both tests

APP_DIR = Path(next(iter(app.__path__)))


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """Imports executed when the module is imported: module body and its if/try blocks, not
    function bodies nor ``if TYPE_CHECKING:`` blocks. With ``deferred``, every import
    statement anywhere (a function-level import only hides a cycle)."""
    if deferred:
        return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody):
                    walk(block)
                for handler in node.handlers:
                    walk(handler.body)

    walk(tree.body)
    return found


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """app module -> the app modules it imports at import time (``deferred``: or anywhere)."""
    modules = {_module_name(p): p for p in APP_DIR.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path)), deferred):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from app.x import y`: y is a submodule or a name of app.x
                targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                targets = targets or [base]
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def test_the_app_has_no_import_cycle():
    graph = import_graph()
    assert "app.jobs.worker" in graph and "app.jobs.registry" in graph["app.jobs.worker"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_cycle_even_through_function_level_imports():
    # app.jobs.worker <-> app.experiments.service was such a cycle, hidden in functions
    graph = import_graph(deferred=True)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle():
    # the detector itself: the old worker <-> experiments shape is reported
    graph = {
        "app.jobs.worker": {"app.experiments.service"},
        "app.experiments.service": {"app.jobs.service", "app.jobs.worker"},
        "app.jobs.service": set(),
    }
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"app.jobs.worker", "app.experiments.service"}
    assert find_cycle({**graph, "app.experiments.service": {"app.jobs.service"}}) is None


def test_the_worker_imports_no_domain_module():
    domain = ("app.datasets", "app.models", "app.experiments", "app.training.pipeline",
              "app.predict")
    seen: set[str] = set()
    todo = ["app.jobs.worker"]
    graph = import_graph()
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert not [m for m in seen if m.startswith(domain)], sorted(seen)


def test_every_registered_runner_resolves():
    from app.jobs.registry import RUNNERS, get_runner

    for kind in RUNNERS:
        assert callable(get_runner(kind))
