"""No import cycle among the app's modules (module-level imports, as Python runs them), and the
worker reaches job runners only through the registry."""

from __future__ import annotations

from tests.structure_support import find_cycle  # one import walk and cycle finder for both tests
from tests.structure_support import import_graph as tree_graph


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """app module -> the app modules it imports at import time (``deferred``: or anywhere):
    tests/test_structure.py's graph of app and solver, its app part."""
    return {
        name: {t for t in edges if t.split(".")[0] == "app"}
        for name, edges in tree_graph(deferred).items()
        if name.split(".")[0] == "app"
    }


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
