"""What a cluster fit keeps on its workers between passes, planned against each worker's own
memory reading before any row is loaded (issue 46).

Three ways to hold the training rows, from the fastest to the leanest:

* ``"features"`` (kernel fits only): each block's mapped features kept (8 r bytes a row;
  while they are mapped, the raw rows too: 8 (d + r));
* ``"rows"``: each block's prepared raw rows kept (8 D bytes a row), a kernel fit mapping
  them again on every pass;
* ``"nothing"``: every pass reads each block from its source (the Parquet file) again, prepares
  and maps it, and lets it go when the task ends: a worker holds only the blocks its threads
  are working on.

Every way also needs, on each of a worker's threads, the transient arrays of the one block a
task works on (``block_bytes``: the read's copies of the raw rows and PER_PASS_COPIES rank-wide
arrays). The plan asks every worker (``worker_memory``) for its memory limit, its lowest
enabled Dask memory threshold (target, spill, pause or the nanny's terminate fraction) and
its fixed cost: its resident set size now less the bytes of the data it holds (the
interpreter, the imported libraries, the worker's own machinery); the budget of a worker is
its threshold times its limit less that fixed cost, times HEADROOM. The blocks are dealt to
the workers largest first, each to the least loaded (``deal``), and a way fits when every
worker's share of it fits its budget. ``"auto"`` takes the first way that fits; a way that
does not fit is a ValueError naming the parameter (``keep``, or ``n_components`` when not
even ``"nothing"`` fits a block of that rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FLOAT = 8
#: copies of a block's raw rows alive while a task reads and prepares it (the reader's
#: columns, their stacked array, the prepared float64 copy, a slice of a split file)
READ_COPIES = 4
#: rank-wide arrays of a block alive at once while it is mapped and its sums are taken (the
#: kernel against the landmarks, its triangular solve, the rotated copy, a pass's rows of A)
PER_PASS_COPIES = 5
#: the share of a worker's budget (threshold x limit - fixed cost) the plan fills: the rest
#: for the allocator's fragmentation, the reduce's sums and what the fixed cost reading missed
HEADROOM = 0.85
#: the ways to hold the rows, fastest first
WAYS = ("features", "rows", "nothing")


def worker_memory(dask_worker: Any) -> dict:
    """This worker's memory reading (run on each worker by ``client.run``): its limit, its
    lowest enabled memory threshold, its resident set size, the bytes of data it holds and
    its threads."""
    import dask
    import psutil

    manager = dask_worker.memory_manager
    fractions = [manager.memory_target_fraction, manager.memory_spill_fraction,
                 manager.memory_pause_fraction,
                 dask.config.get("distributed.worker.memory.terminate")]
    enabled = [float(f) for f in fractions if f]
    return {"limit": int(manager.memory_limit or 0) or None,
            "threshold": min(enabled, default=1.0),
            "rss": int(psutil.Process().memory_info().rss),
            "managed": int(dask_worker.state.nbytes),
            "nthreads": int(dask_worker.state.nthreads)}


@dataclass(frozen=True)
class Worker:
    """A worker's budget (bytes; None: no limit), its fixed cost and threads."""

    address: str
    budget: int | None
    fixed: int
    nthreads: int
    limit: int | None
    threshold: float


def read_workers(client: Any) -> list[Worker]:
    """Every worker's budget from its own memory reading (``worker_memory``)."""
    readings = client.run(worker_memory)
    out = []
    for address, r in sorted(readings.items()):
        fixed = max(0, r["rss"] - r["managed"])
        budget = None if r["limit"] is None else int(
            HEADROOM * (r["threshold"] * r["limit"] - fixed))
        out.append(Worker(address, budget, fixed, max(1, r["nthreads"]), r["limit"],
                          r["threshold"]))
    return out


def deal(sizes: list[int], n_workers: int) -> list[list[int]]:
    """The blocks' indices dealt to ``n_workers`` workers: largest first, each to the worker
    holding the fewest rows so far (ties: the first)."""
    loads = [0] * n_workers
    dealt: list[list[int]] = [[] for _ in range(n_workers)]
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        w = loads.index(min(loads))
        dealt[w].append(index)
        loads[w] += sizes[index]
    return [sorted(blocks) for blocks in dealt]


def block_bytes(rows: int, d: int, rank: int) -> int:
    """A task's transient bytes for a block of ``rows`` rows of ``d`` raw features mapped to
    ``rank`` features (0: a linear fit, the D-wide rows' Gram of the changed rows at most)."""
    return FLOAT * int(rows) * (READ_COPIES * int(d) + PER_PASS_COPIES * int(rank))


def held_bytes(way: str, rows: int, d: int, rank: int) -> int:
    """Bytes kept between passes by a worker holding ``rows`` rows, ``way`` held."""
    if way == "features":
        return FLOAT * int(rows) * (int(d) + int(rank))  # (the map's peak: raw and mapped)
    if way == "rows":
        return FLOAT * int(rows) * (int(d) + 1)
    return 0


@dataclass
class MemoryPlan:
    """The way chosen, each worker's blocks (for ``"features"`` and ``"rows"``) and what each
    way needs and has on the worker that binds."""

    way: str
    dealt: dict[str, list[int]]
    needs: dict[str, int] = field(default_factory=dict)
    budget: int | None = None
    fixed: int = 0
    limit: int | None = None
    threshold: float = 1.0
    nthreads: int = 1

    def info(self) -> dict:
        return {"keep": self.way, "needs_mib": {k: round(v / 2**20, 1)
                                               for k, v in self.needs.items()},
                "budget_mib": None if self.budget is None else round(self.budget / 2**20, 1),
                "fixed_mib": round(self.fixed / 2**20, 1),
                "limit_mib": None if self.limit is None else round(self.limit / 2**20, 1),
                "threshold": self.threshold}


def needs(way: str, rows: int, largest: int, d: int, rank: int, nthreads: int) -> int:
    """A worker's bytes for ``way``: what it keeps plus its threads' blocks in flight."""
    return held_bytes(way, rows, d, rank) + nthreads * block_bytes(largest, d, rank)


def plan(workers: list[Worker], sizes: list[int], d: int, rank: int, keep: str = "auto"
         ) -> MemoryPlan:
    """The way to hold the rows (``keep``: "auto", or one of WAYS; rank 0: a linear fit, no
    "features"), checked against every worker's budget. ValueError naming ``keep`` when the
    way asked for does not fit, or ``n_components`` (``X`` for a linear fit) when no way does."""
    if not workers:
        raise ValueError("client: the cluster has no workers")
    ways = [w for w in WAYS if rank or w != "features"]
    if keep != "auto" and keep not in ways:
        raise ValueError(f"keep: one of 'auto', {', '.join(map(repr, ways))}; got {keep!r}")
    dealt = deal(sizes, len(workers))
    binding = {way: _binding(way, workers, dealt, sizes, d, rank) for way in ways}
    fits = [w for w in ways if binding[w][1].budget is None
            or binding[w][0] <= binding[w][1].budget]
    chosen = keep if keep != "auto" else (fits[0] if fits else None)
    need, worker = binding[chosen or "nothing"]
    result = MemoryPlan(chosen or "nothing", {}, {w: binding[w][0] for w in ways},
                        worker.budget, worker.fixed, worker.limit, worker.threshold,
                        worker.nthreads)
    if chosen is None or chosen not in fits:
        raise ValueError(refusal(result, chosen, sizes, d, rank))
    if chosen != "nothing":
        result.dealt = {w.address: blocks for w, blocks in zip(workers, dealt, strict=True)}
    return result


def _binding(way: str, workers: list[Worker], dealt: list[list[int]], sizes: list[int],
             d: int, rank: int) -> tuple[int, Worker]:
    """(the need, the worker) of the worker with the least budget left under ``way``."""
    best: tuple[float, int, Worker] | None = None
    for worker, blocks in zip(workers, dealt, strict=True):
        rows = sum(sizes[i] for i in blocks)
        largest = max((sizes[i] for i in blocks), default=0)
        if way == "nothing":  # any block may come to any worker
            rows, largest = 0, max(sizes, default=0)
        need = needs(way, rows, largest, d, rank, worker.nthreads)
        slack = float("inf") if worker.budget is None else worker.budget - need
        if best is None or slack < best[0]:
            best = (slack, need, worker)
    assert best is not None
    return best[1], best[2]


def refusal(result: MemoryPlan, chosen: str | None, sizes: list[int], d: int,
            rank: int) -> str:
    """The ValueError's message of a plan that does not fit."""
    have = (f"a worker's budget of {result.budget / 2**20:.0f} MiB ({HEADROOM:g} x "
            f"({result.threshold:g} of its {result.limit / 2**20:.0f} MiB limit - its fixed "
            f"{result.fixed / 2**20:.0f} MiB))")
    if chosen is not None:
        return (f"keep: {chosen!r} needs {result.needs[chosen] / 2**20:.0f} MiB on a worker, "
                f"more than {have}; use keep='auto'")
    largest = max(sizes, default=0)
    what = (f"n_components: rank {rank} needs" if rank else "X: a fit needs")
    fits = ""
    if rank and largest:  # "nothing" holds rank r when threads x block_bytes <= budget
        per_thread = max(0, result.budget) / result.nthreads / (FLOAT * largest)
        fits = (f"; the largest rank that fits is "
                f"{max(0, int((per_thread - READ_COPIES * d) / PER_PASS_COPIES))}")
    return (f"{what} {result.needs['nothing'] / 2**20:.0f} MiB on a worker even reading every "
            f"block again on every pass (blocks of up to {largest} rows of {d} features), "
            f"more than {have}{fits}; use " + ("fewer n_components, " if rank else "")
            + "smaller partitions, or workers with more memory")


def largest_rank(workers: list[Worker], sizes: list[int], d: int, cap: int,
                 keep: str = "auto") -> int:
    """The largest rank (at most ``cap``) that ``keep`` (any way: "auto") holds on every
    worker (0 if none)."""
    lo, hi = 0, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            plan(workers, sizes, d, mid, keep)
            lo = mid
        except ValueError:
            hi = mid - 1
    return lo


def plan_memory(client: Any, sizes: list[int], d: int, rank: int = 0,
                keep: str = "auto") -> MemoryPlan:
    """``plan`` for the cluster of ``client`` (its workers' readings now) and blocks of
    ``sizes`` rows of ``d`` features: ValueError naming ``n_components`` (a kernel fit of
    rank ``rank``), ``X`` (a linear fit, rank 0) or ``keep`` when the rows would not fit."""
    return plan(read_workers(client), [int(s) for s in sizes], int(d), int(rank), keep)
