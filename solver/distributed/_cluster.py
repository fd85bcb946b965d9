"""The training rows in a Dask cluster's memory, and map-reduce passes over them.

``ClusterRows.load`` turns the row-chunked dask arrays X and y into one future per block
holding its rows and labels (``_blocks.prepare``d: float64, the intercept's column appended),
computed from the caller's graph: a block lost with its worker is recomputed by the scheduler
from that graph (so pass a reader or generator graph, not data scattered from the client).
``reduce`` maps a ``_blocks`` function over the blocks and sums the results in a tree of fixed
shape (so the result does not depend on where or in which order the tasks ran); while it
waits, ``tick`` is called every POLL seconds after the first, and if anything raises (the
fit's callback, an interrupt, a task's error) every future of the pass is cancelled before
the exception propagates.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _blocks

#: seconds between two progress ticks while a pass runs
POLL = 0.5
#: blocks' results summed by one task of the reduction tree
FAN_IN = 8
#: tries of a pass whose workers leave the cluster while it runs
RETRIES = 5


def check_arrays(X: Any, y: Any) -> None:
    """ValueError naming X or y when they are not row-chunked dask arrays of the same rows."""
    if X.ndim != 2 or len(X.chunks[1]) != 1:
        raise ValueError("X: must be a 2-D dask array chunked along rows only "
                         f"(one chunk across its {X.shape[1]} columns)")
    if y.ndim != 1 or tuple(y.chunks[0]) != tuple(X.chunks[0]):
        raise ValueError("y: must be a 1-D dask array with the same row chunks as X")


class _WorkerGone(Exception):  # noqa: N818 - a signal, handled inside this module
    """A worker that a pass's tasks were placed on has left the cluster."""


class DistributedFitError(RuntimeError):
    """The cluster could not complete the fit (a task failed, or a block could not be
    recomputed after its workers were lost); the message says which."""


class ClusterRows:
    """One future per row block, holding its prepared rows and labels, and passes over them."""

    def __init__(self, client: Any, parts: list, n: int, D: int,
                 tick: Callable[[int, int], None] | None = None,
                 sources: list | None = None) -> None:
        self.client, self.parts, self.n, self.D = client, parts, n, D
        self.tick = tick
        # streamed (``stream``): each block's graph, computed again by every pass; else None
        self.sources = sources
        self.pending: list = []  # the futures of the pass running now
        self.held: list = []  # futures kept between passes (the blocks' masks of A)
        self.placed: set[str] = set()  # the workers the running pass's tasks are placed on
        self.passes = 0
        self.fit = uuid.uuid4().hex
        count = len(parts) if sources is None else len(sources)
        self.names = [(self.fit, index) for index in range(count)]  # for _blocks' cache

    @staticmethod
    def graphs(X: Any, y: Any, bias: bool) -> list:
        """Each block's (X_b, y_b) (``_blocks.prepare``) as a delayed of the caller's graph."""
        import dask

        check_arrays(X, y)
        prepare = dask.delayed(_blocks.prepare, pure=True)
        return [prepare(xb, yb, bias) for xb, yb in zip(
            X.to_delayed(optimize_graph=False).ravel().tolist(),
            y.to_delayed(optimize_graph=False).ravel().tolist(), strict=True)]

    @classmethod
    def load(cls, client: Any, X: Any, y: Any, bias: bool,
             dealt: dict[str, list[int]] | None = None) -> ClusterRows:
        """Compute the blocks (X_b, y_b) (``_blocks.prepare``) into the cluster's memory: one
        future each, in row order, under keys of their own; ``dealt``: each worker's blocks
        (``_memory.deal``), computed there (elsewhere only when that worker is gone)."""
        blocks = cls.graphs(X, y, bias)
        if dealt:
            parts: list = [None] * len(blocks)
            for worker, indices in dealt.items():
                futures = client.compute([blocks[i] for i in indices], optimize_graph=False,
                                         workers=[worker], allow_other_workers=True)
                for i, future in zip(indices, futures, strict=True):
                    parts[i] = future
        else:
            parts = client.compute(blocks, optimize_graph=False)
        rows = cls(client, parts, 0, int(X.shape[1]) + (1 if bias else 0))
        try:
            rows.wait(rows.parts)
        except BaseException:
            rows.release()
            raise
        return rows

    @classmethod
    def stream(cls, client: Any, X: Any, y: Any, bias: bool) -> ClusterRows:
        """The blocks kept nowhere: every pass computes each block from the caller's graph
        (reads its file) again in the task that uses it, and lets it go when that ends."""
        return cls(client, [], 0, int(X.shape[1]) + (1 if bias else 0),
                   sources=cls.graphs(X, y, bias))

    @property
    def blocks(self) -> int:
        return len(self.parts) if self.sources is None else len(self.sources)

    def put(self, value: np.ndarray) -> Any:
        """A future holding ``value`` for the blocks' tasks (``_blocks.identity``)."""
        future = self.client.submit(_blocks.identity, value, pure=False)
        self.pending.append(future)
        return future

    def map(self, fn: Callable, *, blocks: list | None = None, keep: bool = False,
            **kwargs: Any) -> list:
        """fn((X_b, y_b)[, blocks_b], **kwargs) for every block b: futures, in row order.

        Each task runs on a worker that holds its block (``who_has``), never elsewhere:
        Dask's work stealing would otherwise copy a block to an idle worker (measured on
        20M x 28 in blocks of 116 MB: 68 MB sent an iteration instead of the 0.3 MB of the
        results). A block not held anywhere (lost) is unrestricted: the scheduler recomputes
        it; if a holder leaves during the pass, ``wait`` starts the pass again (``again``)."""
        # the D-vectors every block reads: sent once (``put``), not in each task
        kwargs = {name: self.put(value) if isinstance(value, np.ndarray) else value
                  for name, value in kwargs.items()}
        if self.sources is not None:
            return self._map_streamed(fn, blocks, kwargs)
        holders = self.client.who_has(self.parts)
        extra = blocks if blocks else [None] * len(self.parts)
        futures = []
        for part, more in zip(self.parts, extra, strict=True):
            where = list(holders.get(part.key, ())) or None
            args = (part,) if blocks is None else (part, more)
            # ``keep``: results held between passes (a kernel fit's mapped blocks) may run
            # elsewhere, so that the scheduler can recompute one lost with its worker
            futures.append(self.client.submit(fn, *args, workers=where, pure=False,
                                              allow_other_workers=keep and where is not None,
                                              **kwargs))
            self.placed.update(where or ())
        self.pending.extend(futures)
        return futures

    def _map_streamed(self, fn: Callable, blocks: list | None, kwargs: dict) -> list:
        """``map`` of streamed rows: fn of each block's graph, computed where the scheduler
        places it (a worker lost mid-pass: the scheduler recomputes its tasks elsewhere)."""
        import dask

        call = dask.delayed(fn, pure=False)
        extra = blocks if blocks else [None] * len(self.sources)
        graph = [call(source, **kwargs) if blocks is None else call(source, more, **kwargs)
                 for source, more in zip(self.sources, extra, strict=True)]
        futures = self.client.compute(graph, optimize_graph=False)
        self.pending.extend(futures)
        return futures

    def again(self, run: Callable[[], Any]) -> Any:
        """run(), started again (up to RETRIES times) when a worker its tasks were placed on
        leaves the cluster."""
        for _ in range(RETRIES):
            try:
                return run()
            except _WorkerGone:
                continue
            finally:
                self.pending.clear()
                self.placed = set()
        raise DistributedFitError(f"the cluster lost a worker during {RETRIES} tries of a pass")

    def reduce(self, fn: Callable, *, combine: Callable = _blocks.add,
               blocks: list | None = None, **kwargs: Any) -> Any:
        """The sum (``combine``) over the blocks of fn((X_b, y_b)[, blocks_b], **kwargs)."""
        return self.again(lambda: self.total(self.map(fn, blocks=blocks, **kwargs), combine))

    def total(self, parts: list, combine: Callable = _blocks.add) -> Any:
        """The parts' sum by a tree of FAN_IN-way ``combine`` tasks, waited for; the parts and
        the tree are released once the sum is here (not left to the garbage collector: a
        future kept alive by a reference cycle keeps its result wanted, and a worker lost
        meanwhile has the scheduler compute it again, a task of the fit left after it)."""
        tree = list(parts)
        self.pending.extend(parts)
        while len(parts) > 1:
            parts = [self.client.submit(combine, *parts[i:i + FAN_IN], pure=False)
                     for i in range(0, len(parts), FAN_IN)]
            self.pending.extend(parts)
            tree.extend(parts)
        self.passes += 1
        self.wait(parts)
        value = self.fetch(parts[0])
        for future in tree:
            future.release()
        return value

    def fetch(self, future: Any) -> Any:
        """The finished future's result; a future lost since (its worker left after the
        wait) starts the pass again, as ``wait`` does (its futures cancelled first)."""
        from distributed import wait

        try:
            # (``wait``, not ``future.result(timeout=...)``: under heavy load that call's
            # timeout can fire as its result arrives, and distributed 2026.8's ``sync`` then
            # raises UnboundLocalError instead of either)
            while True:
                try:
                    wait([future], timeout=POLL)
                    break
                except TimeoutError:
                    self._check_workers()
            return future.result()
        except BaseException:
            self.cancel()
            raise

    def _check_workers(self) -> None:
        """_WorkerGone when a worker the pass's tasks were placed on has left."""
        if not self.placed <= set(self.client.scheduler_info()["workers"]):
            raise _WorkerGone

    def wait(self, futures: list) -> None:
        """Wait for the futures, ticking; on any exception cancel the pass, then raise
        (a task's own error as DistributedFitError)."""
        from distributed import wait

        try:
            while True:
                try:
                    wait(futures, timeout=POLL)
                    break
                except TimeoutError:
                    self._check_workers()
                    # (not before the first POLL: a cancel sent before the scheduler has
                    # registered the pass's graph would miss its tasks)
                    if self.tick is not None:
                        self.tick(sum(future.done() for future in futures), len(futures))
            failed = [future for future in futures if future.status != "finished"]
            if failed:
                first = failed[0]
                if first.status == "lost":  # finished, then lost with its worker
                    raise _WorkerGone
                why = repr(first.exception()) if first.status == "error" else first.status
                raise DistributedFitError(f"the cluster failed a task of the fit: {why}")
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        """Cancel every future of the pass now running (queued tasks are dropped; a running
        one finishes on its worker and its result is discarded) and release its finished
        ones now: a reference left to them (an exception's traceback holds the pass's frames
        until the garbage collector breaks its cycle) would keep their results, and their
        tasks, in the scheduler after the fit."""
        running = [future for future in self.pending if not future.done()]
        if running:  # (cancelling a finished task whose dependents were released trips
            self.client.cancel(running)  # the scheduler: those are released instead)
        for future in self.pending:
            if future.done():
                future.release()
        self.pending = []

    def hold(self, futures: list) -> None:
        """Keep these futures between passes instead of those held so far (dropped)."""
        for future in self.held:
            future.release()
        self.held = list(futures)

    def release(self) -> None:
        """Cancel the running pass and the held futures; let go of the persisted blocks
        (released, not cancelled: the caller may hold the same keys)."""
        self.cancel()
        self.hold([])
        if self.parts or self.sources:
            self.client.run(_blocks.forget, self.fit, on_error="ignore")
        for future in self.parts:
            future.release()
        self.parts = []

