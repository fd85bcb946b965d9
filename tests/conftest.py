"""The suite's tiers (docs/testing.md), set on every test at collection as markers:

* ``unit``: no app, no database, no process (tests/solver and the pure tests elsewhere);
* ``service``: the app in this process (TestClient, a Worker in a thread) on a temporary database;
* ``process``: starts a process, a live server, a browser or a Dask cluster;
* ``postgres``: runs against PostgreSQL (the twin of a SQLite test, or a test that needs
  TEST_DATABASE_URL itself);
* ``slow``: long tests on the shared datasets (set by hand).

Each test gets one of unit / service / process (an explicit ``@pytest.mark.process`` wins), and
``postgres`` on its PostgreSQL variant. ``process`` is found by reading the test's source, its
fixtures' and the module's helpers they call (one that runs ``subprocess``, ``Popen``,
``live_server``, a worker process, ``LocalCluster``, Playwright, ``multiprocessing``): a test that
starts one some other way is marked by hand.

The PostgreSQL twin of a service test runs only where the database matters: the modules in
POSTGRES_TWIN (SQL paths, locks and concurrency, migrations, the logs) and tests marked
``@pytest.mark.postgres`` by hand; ``--postgres-twin=all`` runs every twin."""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import re
import subprocess
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

# Service-test modules whose PostgreSQL twin runs (tests/app/<name>.py): where SQL, locks,
# transactions, migrations or the logs' writers differ between the backends.
POSTGRES_TWIN = frozenset({
    "test_auth.py",  # keys: lookups, revocation, pagination
    "test_auth_serving.py",  # row locks on api_keys, background stamps
    "test_batch_worker.py",  # chunks written once across worker processes
    "test_datasets.py",  # CRUD and cascades
    "test_dataset_references.py",  # the dataset_references table (migration 0013), cascades
    "test_dataset_references_changes.py",  # the files' recorded stamps (JSON) read back
    "test_batch_as_used.py",  # failed jobs' kept results, output types, download formats
    "test_timestamp_range.py",  # instants at the ends of the range, on both drivers
    "test_export_bundle_hostile.py",  # a NUL is refused by PostgreSQL, stored by SQLite
    "test_faults_inputs.py",  # NUL characters
    "test_faults_load.py",  # the pool under concurrent requests
    "test_faults_locks.py",  # lock waits and timeouts
    "test_faults_schema.py",  # an old schema
    "test_fuzz_acceptance.py",  # schemathesis over every operation (issue 45: both databases)
    "test_hardening.py",  # ids out of the database's integer range
    "test_leaderboard.py",  # hold-out rows read back from JSON, models listed by dataset
    "test_idempotency.py",  # unique constraints under concurrent retries
    "test_jobs.py",  # the queue: claims, cancels
    "test_jobs_delete_race.py",
    "test_jobs_leases.py",
    "test_jobs_reaping_outages.py",  # no reaping after an outage; a dead worker's job taken
    "test_jobs_wakeup.py",  # idle workers woken by NOTIFY
    "test_low_items.py",  # timestamps and time zones, key expiry
    "test_migrations.py",
    "test_monitoring_feedback.py",  # labels joined to the log by id
    "test_monitoring_log.py",  # COPY on PostgreSQL, multi-row INSERT on SQLite
    "test_monitoring_log_durable.py",
    "test_monitoring_window.py",  # rows read off the DBAPI cursor: JSON, Boolean, UTC types
    "test_predict_serving.py",  # read-only transactions
    "test_registry.py",  # aliases and versions under concurrency
    "test_registry_processes.py",
    "test_registry_resolve.py",  # references resolved in one read
    "test_serving_recheck.py",  # the recheck window, on both databases
    "test_shadow.py",  # a second scorer on the same database
    "test_storage_chunks.py",  # array chunks (bytea / BLOB)
    "test_worker_leases.py",
    "test_worker_processes.py",
})

# The Dask clusters' worker processes (distributed.LocalCluster in the solver's and the app's
# cluster tests) are forked from one server process per test process that imported distributed,
# numpy and pandas once (distributed's forkserver preload), not spawned afresh each: a spawned
# worker imports them, and pytest's own main module, again. Measured: a two-worker cluster
# started, its workers importing solver, and closed in 13-15 s instead of 26-30 s on the shared
# 2-core machine at load 20 (the first of a process 21 s: the server's start). The workers'
# environment (OMP_NUM_THREADS=1 and the rest of distributed.nanny.pre-spawn-environ) is set
# before the server starts, as before each spawn. A value given in the environment wins.
# The modules of SPAWNED_WORKERS read a worker's memory (its resident set as fixed cost, the
# cluster memory plan of issue 46): theirs are spawned, as a deployed ``dask worker`` starts (a
# forked worker's resident set is not one's: the 450 MiB worker's plan of
# test_dataset_references_cluster then held a partition the spawned one cannot).
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD", "forkserver")
if "dask" in sys.modules:  # imported before this file (a plugin): read the environment again
    sys.modules["dask"].config.refresh()
SPAWNED_WORKERS = frozenset({"test_dataset_references_cluster.py", "test_distributed_kernel.py"})


@pytest.fixture(autouse=True, scope="module")
def _spawned_dask_workers(request: pytest.FixtureRequest) -> Iterator[None]:
    """SPAWNED_WORKERS' modules: their clusters' workers spawned (module-scoped and autouse, so
    set before their module-scoped clusters start)."""
    if request.path.name not in SPAWNED_WORKERS:
        yield
        return
    import dask

    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        yield

# What starts a process, a server, a browser or a cluster, in a test's or a fixture's source.
STARTS_A_PROCESS = re.compile(
    r"\bsubprocess\.|\bPopen\b|\bstart_worker_process\b|\blive_server\b|\bui_server\b"
    r"|\bLocalCluster\b|\bsync_playwright\b|\bmultiprocessing\b|\bos\.fork\b|\bPostgresServer\b"
)


# The seconds each test took (those of 0.5 s or more; written by ``--write-test-seconds``): the
# files run heaviest first (``_heaviest_files_first``). A test not listed counts as
# UNLISTED_SECONDS, or PROCESS_SECONDS in the process tier; a stale entry only moves a file in
# the order.
TEST_SECONDS = Path(__file__).with_name("test_seconds.json")
UNLISTED_SECONDS = 0.1
PROCESS_SECONDS = 6.0
_measured: dict[str, float] = defaultdict(float)


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's --dist loadfile hands out files in the collection's order only when its
    # own reordering (by number of tests, on by default) is off: this suite orders them by
    # weight instead, so that no long file of few tests starts last and runs alone.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--write-test-seconds",
        action="store_true",
        help=f"record the seconds of the tests that ran in {TEST_SECONDS.name} (those of 0.5 s or "
        "more; the order the files run in)",
    )
    parser.addoption(
        "--postgres-twin",
        choices=("database", "all"),
        default="database",
        help="database: the PostgreSQL twin of the modules where the database matters "
        "(tests/conftest.py POSTGRES_TWIN, or marked postgres); all: of every service test",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    every_twin = config.getoption("--postgres-twin") == "all"
    kept, dropped = [], []
    for item in items:
        on_postgres = _on_postgres(item)
        if on_postgres and not every_twin and not _twin_wanted(item):
            dropped.append(item)
            continue
        if on_postgres and item.get_closest_marker("postgres") is None:
            item.add_marker(pytest.mark.postgres)
        item.add_marker(_tier(item))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = _heaviest_files_first(kept)


def _heaviest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items, files ordered by their weight (their tests' seconds summed), heaviest first
    (longest first: the processes end close together); the tests of a file stay together and in
    their order."""
    seconds = _recorded_seconds()
    weight: dict[str, float] = defaultdict(float)
    for item in items:
        default = PROCESS_SECONDS if item.get_closest_marker("process") else UNLISTED_SECONDS
        weight[item.nodeid.split("::")[0]] += seconds.get(item.nodeid, default)
    return sorted(items, key=lambda item: -weight[item.nodeid.split("::")[0]])


def _recorded_seconds() -> dict[str, float]:
    """TEST_SECONDS' entries (none when the file is missing or unreadable)."""
    try:
        return json.loads(TEST_SECONDS.read_text())
    except (OSError, ValueError):
        return {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[report.nodeid] += report.duration  # (setup, call and teardown; under xdist in
    # the controlling process too, which gets every worker's reports)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("--write-test-seconds") and not hasattr(config, "workerinput"):
        kept = _recorded_seconds()  # the tests that ran replace their entries; the others stay
        for nodeid, spent in _measured.items():
            kept.pop(nodeid, None)
            if spent >= 0.5:
                kept[nodeid] = round(spent, 1)
        TEST_SECONDS.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n")


class UnmarkedProcessWarning(UserWarning):
    """A test outside the process tier started a process: mark it ``@pytest.mark.process``."""


@pytest.fixture(autouse=True)
def _process_tier_check(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Warn (UnmarkedProcessWarning) when a test not in the process tier starts a process
    with subprocess: the tier's markers are found by reading sources, this sees what ran."""
    if request.node.get_closest_marker("process") is not None:
        yield
        return
    started: list[object] = []
    popen_init = subprocess.Popen.__init__

    def recorded(self: subprocess.Popen, args: object, *more: object, **kw: object) -> None:
        started.append(args)
        popen_init(self, args, *more, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess.Popen, "__init__", recorded)
    yield
    if started:
        warnings.warn(
            UnmarkedProcessWarning(
                f"{request.node.nodeid} started {started[0]!r} but is not marked process "
                "(docs/testing.md)"
            ),
            stacklevel=1,
        )


def _on_postgres(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    values = callspec.params.values() if callspec is not None else ()
    return any(isinstance(v, str) and v == "postgresql" for v in values)


def _twin_wanted(item: pytest.Item) -> bool:
    return item.path.name in POSTGRES_TWIN or item.get_closest_marker("postgres") is not None


def _tier(item: pytest.Item) -> pytest.MarkDecorator:
    if item.get_closest_marker("process") is not None or _starts_a_process(item):
        return pytest.mark.process
    names = set(getattr(item, "fixturenames", ()))
    if "tests/app/" in item.path.as_posix() or names & {"database_url", "engine", "client"}:
        return pytest.mark.service
    return pytest.mark.unit


def _starts_a_process(item: pytest.Item) -> bool:
    sources = [_source(getattr(item, "function", None))]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        sources += [_source(d.func) for d in defs if d.func.__module__ != __name__]
    calls = _calls_of(_starters(item.path))
    return any(_starts(text, calls) for text in sources)


@functools.cache
def _starts(text: str, calls: re.Pattern[str] | None) -> bool:
    return bool(STARTS_A_PROCESS.search(text) or (calls is not None and calls.search(text)))


@functools.cache
def _calls_of(names: frozenset[str]) -> re.Pattern[str] | None:
    return re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\(") if names else None


@functools.cache
def _source(obj: object) -> str:
    try:
        return inspect.getsource(obj)  # type: ignore[arg-type]
    except (TypeError, OSError):
        return ""


def _functions(path: Path) -> dict[str, str]:
    """The module's top-level functions (tests left out): name -> source."""
    try:
        text = path.read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError):
        return {}
    lines = text.splitlines()
    return {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("test_")
    }


@functools.cache
def _support_functions() -> dict[str, str]:
    """The helpers of the suite's support modules (tests/**, not test_*.py or conftest.py)."""
    found: dict[str, str] = {}
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        if not path.name.startswith(("test_", "conftest")):
            found.update(_functions(path))
    return found


@functools.cache
def _starters(path: Path) -> frozenset[str]:
    """The helpers a test of ``path`` may call (its module's and the support modules') that
    start a process, directly or through another helper."""
    bodies = {**_support_functions(), **_functions(path)}
    starters = {name for name, body in bodies.items() if STARTS_A_PROCESS.search(body)}
    while starters:
        calls = _calls_of(frozenset(starters))
        more = {n for n, body in bodies.items() if n not in starters and calls.search(body)}
        if not more:
            break
        starters |= more
    return frozenset(starters)
