"""Runtime state is the app's, not a module's (issue 27): no module of app/ keeps a registry.

The rule, checked on app/'s syntax trees:

* a **registry** is a module-level name bound to a mutable container — a dict, list or set
  display or comprehension, or a call of ``dict``, ``list``, ``set``, ``defaultdict``,
  ``OrderedDict``, ``deque``, ``Counter``, ``WeakKeyDictionary``, ``WeakValueDictionary`` or
  ``WeakSet`` — that code of the module **writes at run time**: an item assigned or deleted
  (``NAME[k] = v``, ``del NAME[k]``), a mutating method called (``setdefault``, ``update``,
  ``pop``, ``popitem``, ``clear``, ``append``, ``extend``, ``add``, ``discard``, ``remove``,
  ``insert``, ``appendleft``), or the name rebound through ``global``. None may exist: state
  that lives as long as a database, an event loop or an app is a part of
  ``app.core.runtime.Runtime`` (or of an object the app makes), reached through a dependency
  or an argument;
* a weak-keyed or weak-valued container at module level is refused even if nothing writes it
  (its only use is a registry keyed by an object: an engine, a pool, a loop);
* ``functools.lru_cache`` / ``cache`` on a function with a parameter typed as an engine, a
  pool, a session, a session factory, an event loop, a request or an app is refused (a cache
  keyed by those is a registry); a memo of a pure function of plain values (``parse`` of a
  reference's text) is a constant's cache and allowed.

Constants (module-level containers nothing writes: tables, frozensets, examples) are fine.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from app.core.runtime import Part, Runtime

APP = Path(__file__).resolve().parents[2] / "app"
CONTAINER_CALLS = {
    "dict",
    "list",
    "set",
    "defaultdict",
    "OrderedDict",
    "deque",
    "Counter",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "WeakSet",
}
WEAK_CALLS = {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}
MUTATORS = {
    "setdefault",
    "update",
    "pop",
    "popitem",
    "clear",
    "append",
    "extend",
    "add",
    "discard",
    "remove",
    "insert",
    "appendleft",
}
STATEFUL_TYPES = {
    "Engine",
    "Pool",
    "Session",
    "sessionmaker",
    "AbstractEventLoop",
    "Request",
    "FastAPI",
    "Starlette",
    "Runtime",
}
# Module-level containers written at run time that are not registries: none today. An entry
# is "module.py:NAME" with the reason beside it.
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class Finding:
    where: str
    why: str


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _container_kind(value: ast.AST | None) -> str | None:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return type(value).__name__
    name = _call_name(value) if value is not None else None
    return name if name in CONTAINER_CALLS else None


def _module_containers(tree: ast.Module) -> dict[str, tuple[int, str]]:
    """Module-level names bound to a mutable container: name -> (line, kind)."""
    found: dict[str, tuple[int, str]] = {}
    for node in tree.body:
        targets: list[ast.AST] = []
        value: ast.AST | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        kind = _container_kind(value)
        for target in targets:
            if kind is not None and isinstance(target, ast.Name):
                found[target.id] = (node.lineno, kind)
    return found


def _written(tree: ast.Module, names: set[str]) -> dict[str, int]:
    """Of ``names``, those written inside a function or class of the module: name -> line."""
    written: dict[str, int] = {}
    for outer in tree.body:
        if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(outer):
            if isinstance(node, ast.Global):
                written.update({n: node.lineno for n in node.names if n in names})
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
                if isinstance(node.value, ast.Name) and node.value.id in names:
                    written[node.value.id] = node.lineno
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                mutated = isinstance(owner, ast.Name) and owner.id in names
                if node.func.attr in MUTATORS and mutated:
                    written[owner.id] = node.lineno
    return written


def _annotation_names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    text = ast.unparse(node)
    return {part for part in STATEFUL_TYPES if part in text}


def _keyed_caches(tree: ast.Module, rel: str) -> list[Finding]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        decorators = {
            (_call_name(d) or (d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")))
            for d in node.decorator_list
        }
        if not decorators & {"lru_cache", "cache"}:
            continue
        args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        keyed = set().union(*(_annotation_names(a.annotation) for a in args)) if args else set()
        if keyed:
            found.append(Finding(f"{rel}:{node.lineno}", f"cache keyed by {sorted(keyed)}"))
    return found


def registry_findings(root: Path = APP) -> list[Finding]:
    """Every registry under ``root`` by the module docstring's rule."""
    findings: list[Finding] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        containers = _module_containers(tree)
        written = _written(tree, set(containers))
        for name, (line, kind) in containers.items():
            key = f"{path.name}:{name}"
            if key in ALLOWED:
                continue
            if kind in WEAK_CALLS:
                findings.append(Finding(f"{rel}:{line}", f"{name}: a module-level {kind}"))
            elif name in written:
                findings.append(
                    Finding(f"{rel}:{line}", f"{name}: a {kind} written at line {written[name]}")
                )
        findings += _keyed_caches(tree, rel)
    return findings


def test_no_module_level_registry_in_app():
    findings = registry_findings()
    assert findings == [], "\n".join(f"{f.where}: {f.why}" for f in findings)


@pytest.mark.parametrize(
    "source, why",
    [
        ("import weakref\n_r = weakref.WeakKeyDictionary()\n", "WeakKeyDictionary"),
        ("_r = {}\ndef get(pool):\n    _r[pool] = 1\n", "written"),
        ("_r: dict = dict()\ndef get(loop):\n    return _r.setdefault(loop, 1)\n", "written"),
        ("_r = []\ndef put(x):\n    _r.append(x)\n", "written"),
        ("_r = None\n_s = set()\ndef f():\n    global _s\n    _s = {1}\n", "written"),
        (
            "from functools import lru_cache\n@lru_cache\ndef f(engine: Engine) -> int:\n"
            "    return 1\n",
            "cache keyed by",
        ),
    ],
)
def test_the_rule_finds_each_kind_of_registry(tmp_path, source, why):
    """The scanner itself: each shape of registry is found (else the test above proves
    nothing); constants and pure memos are not."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "m.py").write_text(source)
    findings = registry_findings(tmp_path / "app")
    assert len(findings) == 1 and why in findings[0].why, findings


def test_constants_and_pure_memos_are_not_registries(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "m.py").write_text(
        "from functools import lru_cache\nTABLE = {'a': 1}\nNAMES = ['x']\n"
        "def read(k):\n    return TABLE[k] + len(NAMES)\n"
        "@lru_cache(maxsize=8)\ndef parse(text: str) -> int:\n    return len(text)\n"
    )
    assert registry_findings(tmp_path / "app") == []


# --- the runtime's own behaviour ----------------------------------------------------------------


def test_a_part_is_made_once_per_runtime_and_closed_last_made_first(engine, settings):
    closed: list[str] = []
    first = Part("first", lambda runtime: ["first", runtime], lambda v: closed.append(v[0]))
    second = Part("second", lambda runtime: ["second"], lambda v: closed.append(v[0]))
    a, b = Runtime(engine, settings), Runtime(engine, settings)
    assert a.peek(first) is None
    made = a.get(first)
    assert a.get(first) is made and made[1] is a  # once, from its runtime
    assert b.get(first) is not made  # each runtime its own (another app, another worker)
    a.get(second)
    a.close()
    assert closed == ["second", "first"]
    assert a.peek(first) is None  # a closed runtime holds no part
    b.close()


def test_sessions_carry_their_runtime(app):
    from sqlalchemy.orm import Session

    from app.core.runtime import runtime_of, session_runtime

    runtime = app.state.runtime
    with runtime.sessions() as s, runtime.read_sessions() as r:
        assert runtime_of(s) is runtime and runtime_of(r) is runtime
    with Session(runtime.engine) as plain:
        assert session_runtime(plain) is None
        with pytest.raises(TypeError):
            runtime_of(plain)


def test_the_fast_lane_serves_one_app_under_successive_event_loops(app, settings):
    """A runtime's limiter is made once and used from whichever loop runs the app (a
    TestClient per block, uvicorn's one loop): anyio's asyncio limiter binds to none."""
    from app.serving.lanes import FAST_LANE

    lane = app.state.runtime.get(FAST_LANE)

    async def use() -> int:
        async with lane:
            return lane.borrowed_tokens

    assert anyio.run(use) == 1
    assert anyio.run(use) == 1  # a second, new event loop
    assert app.state.runtime.get(FAST_LANE) is lane
