"""The import walk and cycle finder tests/test_structure.py and
tests/app/test_jobs_import_cycles.py share."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


PACKAGES = ("app", "solver")


def _sources(package: str) -> dict[str, Path]:
    """module name -> file of every module of ``package``."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = {name: path for p in PACKAGES for name, path in _sources(p).items()}


TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: its body and if/try blocks (not function
    bodies, not ``if TYPE_CHECKING:``)."""
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


def _imported_names(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute module names an import statement of module ``name`` refers to."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
        anchor = package.split(".")
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    # `from x import y`: y is a submodule or a name of x
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def import_graph(deferred: bool) -> dict[str, set[str]]:
    """module -> the app/solver modules it imports at import time (``deferred``: anywhere)."""
    graph = {}
    for name, tree in TREES.items():
        nodes = (
            [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
            if deferred
            else _top_level_imports(tree)
        )
        targets = {t for n in nodes for t in _imported_names(name, n)}
        graph[name] = {t for t in targets if t in MODULES and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None
