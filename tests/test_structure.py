"""The shape of the tree (docs/architecture.md): no import cycle across ``app`` and ``solver``,
``solver`` imports nothing of the service (not even inside a function) and loads none of it,
no private API of another package, the import-linter contracts hold, and no function body is
over 60 lines; no test sleeps to synchronise (tests.wait_support)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.structure_support import (  # (shared with other test modules)
    MODULES,
    ROOT,
    TREES,
    _imported_names,
    find_cycle,
    import_graph,
)

MAX_BODY_LINES = 60


@pytest.mark.parametrize("deferred", [False, True], ids=["import-time", "function-level-too"])
def test_app_and_solver_together_have_no_import_cycle(deferred):
    graph = import_graph(deferred)
    # the graph spans both: the app imports the solver's surface, which imports its modules
    assert "solver" in graph["app.training.pipeline"]
    assert "solver.protocol" in graph["solver"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_sees_a_cycle_through_both_packages():
    graph = {"solver.a": {"app.b"}, "app.b": {"solver.a"}, "app.c": set()}
    assert set(find_cycle(graph) or ()) == {"solver.a", "app.b"}


def test_no_module_of_solver_imports_app_anywhere():
    offenders = [
        f"{name}:{node.lineno}"
        for name, tree in TREES.items()
        if name.split(".")[0] == "solver"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(t == "app" or t.startswith("app.") for t in _imported_names(name, node))
    ]
    assert offenders == []


def test_importing_solver_loads_no_service_module():
    code = (
        "import sys, solver\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('app', 'fastapi', 'sqlalchemy', 'starlette'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "", done.stdout


# The exceptions, each with its reason, its guard and its test.
PRIVATE_ALLOWED = {
    # solver/_gram_matrix.py: the Gram build calls scipy's sparse product kernel directly, its
    # output allocated at its bound: this skips the symbolic pass ``P @ B`` makes first (half
    # the multiply's time; the build 0.63 -> 0.42 s of CPU on bench/wide.py's 100k x 2,000).
    # Guarded: the public ``P @ B`` where the import fails or the kernel refuses its arguments;
    # tests/solver/test_gram_matrix.py runs the build both ways.
    ("solver._gram_matrix", "scipy.sparse._sparsetools"),
    # solver/_huge_pages.py: numpy's switch for asking huge pages for large arrays, off while a
    # linear or exact-kernel fit runs (on a VM that hands free memory back to its host, such a
    # fit's huge page faults cost 0.2-1.9 s of system time: 100k x 2,000 sparse 0.99 -> 0.80 s,
    # 800k x 28 dense 2.4 -> 1.9 s). Guarded: nothing changes where the function is missing;
    # tests/solver/test_huge_pages.py checks the switch is off inside a fit and restored after.
    ("solver._huge_pages", "numpy._core.multiarray"),
}


def test_no_private_api_of_another_package():
    """No ``_private`` module of scikit-learn (or any other package) imported but the
    PRIVATE_ALLOWED ones, and the service uses only the solver's public modules."""
    offenders = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or getattr(node, "level", 0):
                continue
            modules = (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            )
            for module in modules:
                parts = (module or "").split(".")
                own = parts[0] == name.split(".")[0]
                if (name, module) in PRIVATE_ALLOWED:
                    continue
                if not own and any(p.startswith("_") and not p.startswith("__") for p in parts):
                    offenders.append(f"{name}:{node.lineno} imports {module}")
    assert offenders == []


def test_no_test_module_imports_another_test_module():
    """What tests share lives in support modules (``*_support.py``, ``support.py``,
    conftest): a test module imported by another runs its module-level code twice and drags its
    fixtures and tests' names along."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert offenders == []


SLEEP_MODULES = ("time", "asyncio", "anyio", "trio")
SLEEPS_DECLARED = "tests/wait_support.py"  # wait_until and the named deliberate delays


def _sleeps(tree: ast.AST) -> list[int]:
    """Lines that sleep: ``time.sleep(...)`` (or asyncio's, anyio's, trio's), a ``sleep``
    imported from one of them, or ``Event().wait(s)`` on an event nobody can set."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in SLEEP_MODULES:
            lines += [node.lineno] if any(a.name == "sleep" for a in node.names) else []
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, attr = node.func.value, node.func.attr
        if attr == "sleep" and isinstance(owner, ast.Name) and owner.id in SLEEP_MODULES:
            lines.append(node.lineno)
        elif attr == "wait" and isinstance(owner, ast.Call) and not owner.args:
            name = owner.func.attr if isinstance(owner.func, ast.Attribute) else getattr(
                owner.func, "id", "")
            lines += [node.lineno] if name == "Event" else []
    return lines


def test_the_sleep_scan_sees_each_form():
    source = ("import time, asyncio, threading\nfrom time import sleep\ntime.sleep(1)\n"
              "async def f():\n    await asyncio.sleep(0)\nthreading.Event().wait(0.1)\n"
              "e = threading.Event()\ne.wait(1)\nstop.wait(0.02)\n")
    assert sorted(_sleeps(ast.parse(source))) == [2, 3, 5, 6]  # not a settable event's wait


def test_no_test_sleeps_to_synchronise():
    """A test waits for something to happen on an event or a condition (tests.wait_support's
    ``wait_until``, a threading.Event, the recheck clock), never by sleeping; a delay that is
    the behaviour under test is one of wait_support's named helpers (docs/testing.md)."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        if name != SLEEPS_DECLARED:
            offenders += [f"{name}:{line}" for line in _sleeps(ast.parse(path.read_text()))]
    assert offenders == []


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first line of the body (its docstring included) to the last."""
    return node.end_lineno - node.body[0].lineno + 1  # type: ignore[operator]


def test_the_body_scan_counts_the_docstring_and_nested_functions():
    tree = ast.parse('def f():\n    """doc\n    more"""\n    def g():\n        return 1\n'
                     "    return g\n")
    f = tree.body[0]
    assert isinstance(f, ast.FunctionDef) and _body_lines(f) == 5


def test_no_function_body_is_over_60_lines():
    """Every function of app/ and solver/, each named with its length: none is exempt."""
    offenders = [
        f"{MODULES[name].relative_to(ROOT)}:{node.lineno} {node.name} ({_body_lines(node)})"
        for name, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _body_lines(node) > MAX_BODY_LINES
    ]
    assert offenders == [], "\n".join(offenders)


def test_the_import_linter_contracts_hold():
    """The layers of pyproject.toml's [tool.importlinter] (also run by .ci/run)."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout



def _private_solver_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import of a ``_private`` solver module (``solver._x``,
    ``solver.y._z``) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level:
            # ``from solver.x import _y``: _y may be a private module (or a private name)
            modules = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names
                                             if a.name.startswith("_")
                                             and node.module != "solver.internals"]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "solver" and any(p.startswith("_") for p in parts[1:]):
                found.append((node.lineno, module))
    return sorted(set(found))


def test_the_private_solver_import_scan_sees_both_forms():
    source = ("import solver._linalg\nfrom solver.distributed._memory import plan\n"
              "from solver.internals import linalg\nfrom solver import MSVMAv\n"
              "import solver.distributed\nfrom solver.distributed import _kernel, fit_on_cluster\n")
    assert _private_solver_imports(source) == [(1, "solver._linalg"),
                                               (2, "solver.distributed._memory"),
                                               (6, "solver.distributed._kernel")]


def test_tests_and_benches_reach_the_solver_through_its_declared_surfaces():
    """Tests and benchmarks import ``solver``'s public modules or its declared internal surface
    (``solver.internals``), never a ``_private`` module: the solver may reshape those freely."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for top in ("tests", "bench")
        for path in sorted((ROOT / top).rglob("*.py"))
        for line, module in _private_solver_imports(path.read_text())
    ]
    assert offenders == []


KERNEL_NAMES = frozenset({"linear", "rbf", "poly", "precomputed", "sigmoid_kernel"})
KERNEL_TYPES_MODULE = "solver.kernels"  # the kernel types: the one place a kernel is a name


def _kernel_name_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing something named ``kernel`` (a name, an attribute, a subscript with the
    key "kernel") with a kernel's name: ``kernel == "rbf"``, ``p["kernel"] in ("poly", ...)``."""
    def is_kernel(node: ast.AST) -> bool:
        if isinstance(node, ast.Name | ast.Attribute):
            return "kernel" in (node.id if isinstance(node, ast.Name) else node.attr)
        return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and node.slice.value == "kernel")

    def names_a_kernel(node: ast.AST) -> bool:
        values = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return any(isinstance(v, ast.Constant) and v.value in KERNEL_NAMES for v in values)

    def compares(node: ast.Compare) -> bool:
        if all(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            # a kernel tested against names; not a name looked up in a list of kernels asked
            # for ("rbf" in kernels: which kernels a search races)
            return is_kernel(node.left) and names_a_kernel(node.comparators[0])
        sides = [node.left, *node.comparators]
        return any(map(is_kernel, sides)) and any(map(names_a_kernel, sides))

    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and compares(node)]


def test_the_kernel_comparison_scan_sees_each_form():
    source = ('if kernel == "rbf": pass\nif self.kernel != "linear": pass\n'
              'if p["kernel"] in ("poly", "rbf"): pass\nif kernel_type.smooth: pass\n'
              'if method == "sigmoid": pass\nif "rbf" in kernels: pass\n'
              'if "rbf" == params["kernel"]: pass\n')
    assert _kernel_name_comparisons(ast.parse(source)) == [1, 2, 3, 7]


def test_no_kernel_is_compared_by_name_outside_the_kernel_types():
    """A kernel's behaviour is its type's (solver.kernels: Linear, RBF, Poly, Precomputed),
    not string comparisons spread over the tree (issue 43: there were 57 in 16 files)."""
    offenders = [f"{name}:{line}" for name, tree in TREES.items() if name != KERNEL_TYPES_MODULE
                 for line in _kernel_name_comparisons(tree)]
    assert offenders == []
