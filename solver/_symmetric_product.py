"""G v for the "gram" path's dense symmetric G (BLAS ``dsymv`` on G's upper triangle), on one
BLAS thread or on the fit's threads: whichever this product has measured faster, here, now.

Neither is right on every machine. On ``bench/wide.py``'s 100,000 x 2,000 (D = 2,001, an AMD
EPYC with 2 cores) a product took 0.31 ms on one thread and 0.14 ms on two, and the fit's 505
products on two threads took the whole fit from 0.73 to 0.57 s (medians of 6, alternating).
With another process busy on the second core, two threads took the same fit from 0.74 to
1.01 s (a BLAS thread waits for its descheduled partner), and on a Xeon the whole fit on
threaded BLAS was slower than on one thread (docs/performance.md). So the product times both
settings on its first products, takes the faster (the mean of each one's last WINDOW timings:
under load a threaded product takes 0.25 ms most of the time and 4-8 ms when its partner
thread is descheduled, which a median would hide), and times the other one again after RECHECK
products, then after twice as many each time the choice stands, so that a change of load
(another fit, another process) moves the choice without many slow products where it does not.

Timing the products does not see everything threads cost: once woken, OpenBLAS's threads spin
for a while after each product, and where another process wants the second core they take it
from that process and from this fit's other work. With a process busy on the second core, a fit
that timed only ~10 threaded products still took 1.03 s against 0.84 s on one thread (medians
of 5). So threads are tried only where a core is idle when the fit starts: where
/proc/loadavg counts fewer runnable threads of other processes than there are cores less one
(``spare_cores``). This process's own running threads are not counted: OpenBLAS's threads may
still be spinning after an earlier fit's products, and would otherwise cost the next fit its
threads.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable

import numpy as np
from scipy.linalg import blas

from ._row_blocks import scipy_blas

# Products timed on each setting, alternating, before the faster is taken.
PROBES = 3
# The setting not taken is timed again after RECHECK products, then after twice as many each
# time the choice stands (at most RECHECK_MAX).
RECHECK = 25
RECHECK_MAX = 800
# The settings are compared by the mean of their last WINDOW timings.
WINDOW = 5

# /proc/loadavg is read this many times, SAMPLE_GAP seconds apart, and the fewest runnable
# threads taken: on the idle 2-core machine one reading in ~70 counted a thread of another
# process (a daemon's wake-up), and back-to-back readings see the same one.
SAMPLES = 5
SAMPLE_GAP = 0.001
# Products with a smaller G stay on one thread (a fit this small would pay the samples' few
# milliseconds for little: a product of D = 800 took 0.035 ms on one thread).
THREADED_MIN_DIM = 1024
LOADAVG = "/proc/loadavg"
# This process's threads: those running are not "other" threads (the reader itself, and
# OpenBLAS's threads still spinning after an earlier fit's products).
TASKS = "/proc/self/task"

def spare_cores(path: str = LOADAVG, tasks: str = TASKS) -> int:
    """Cores no other process's thread wants now: the cores, less one for this thread, less
    the threads the kernel counts runnable (/proc/loadavg's fourth field) that are not this
    process's running ones (``tasks``: /proc/self/task/*/stat in state R); the fewest of
    SAMPLES readings SAMPLE_GAP apart. 0 where /proc/loadavg cannot be read."""
    try:
        others = []
        for k in range(SAMPLES):
            if k:
                time.sleep(SAMPLE_GAP)
            with open(path, encoding="ascii") as stream:
                runnable = int(stream.read().split()[3].split("/")[0])
            others.append(runnable - _running_here(tasks))
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, (os.cpu_count() or 1) - 1 - max(0, min(others)))


def _running_here(tasks: str) -> int:
    """Threads of this process in state R (running or runnable); 1 (the reader) where
    ``tasks`` cannot be read."""
    try:
        names = os.listdir(tasks)
    except OSError:
        return 1
    running = 0
    for name in names:
        try:
            with open(os.path.join(tasks, name, "stat"), encoding="ascii",
                      errors="replace") as stream:
                # "tid (comm) S ...": the state follows the last ")" (comm may hold any)
                running += stream.read().rpartition(")")[2].split()[:1] == ["R"]
        except OSError:  # the thread ended meanwhile
            continue
    return max(running, 1)


class SymmetricProduct:
    """``product(G, v)`` = G v for a C-contiguous symmetric G whose upper triangle is current,
    by ``dsymv`` on 1 or on ``threads`` BLAS threads, the faster as measured (module
    docstring); ``threads`` is cut to 1 + the cores idle when it is made (``spare_cores``),
    and to 1 for a G of fewer than THREADED_MIN_DIM rows (``dim``). With ``threads`` 1 it
    never changes the BLAS libraries' thread counts; else it sets them for the product and
    restores the counts it found after it.

    ``threaded`` counts the products made on more than one thread, ``current`` is the last
    product's thread count; ``clock`` is the timer."""

    def __init__(self, threads: int, dim: int = THREADED_MIN_DIM,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        threads = max(1, int(threads)) if dim >= THREADED_MIN_DIM else 1
        self.threads = 1 if threads == 1 else min(threads, 1 + spare_cores())
        self.clock = clock
        self.libs = scipy_blas() if self.threads > 1 else []
        self.times: dict[int, deque] = {s: deque(maxlen=WINDOW) for s in {1, self.threads}}
        self.calls = self.threaded = 0
        self.current = 1
        self.taken, self.gap, self.due = 1, RECHECK, 2 * PROBES + RECHECK

    def __call__(self, G: np.ndarray, v: np.ndarray) -> np.ndarray:
        if self.threads == 1:  # nothing to choose: nothing timed
            self.calls += 1
            return self._dsymv(G, v)
        self.current = setting = self._choose()
        start = self.clock()
        out = self._on_threads(setting, G, v)
        self.times[setting].append(self.clock() - start)
        self.calls += 1
        self.threaded += setting > 1
        return out

    def _choose(self) -> int:
        """The thread count this product runs on (``current`` while it runs)."""
        k = self.calls
        if k < 2 * PROBES:
            return 1 if k % 2 == 0 else self.threads
        faster = min(self.times, key=lambda s: sum(self.times[s]) / len(self.times[s]))
        if faster != self.taken:  # the choice moved: look again soon
            self.taken, self.gap, self.due = faster, RECHECK, k + RECHECK
        if k < self.due:
            return faster
        self.gap = min(2 * self.gap, RECHECK_MAX)
        self.due = k + self.gap
        return self.threads if faster == 1 else 1

    def _on_threads(self, setting: int, G: np.ndarray, v: np.ndarray) -> np.ndarray:
        found = [lib.num_threads for lib in self.libs]
        if all(count == setting for count in found):
            return self._dsymv(G, v)
        for lib in self.libs:
            lib.set_num_threads(setting)
        try:
            return self._dsymv(G, v)
        finally:
            for lib, count in zip(self.libs, found, strict=True):
                lib.set_num_threads(count)

    @staticmethod
    def _dsymv(G: np.ndarray, v: np.ndarray) -> np.ndarray:
        # G's upper triangle is the lower triangle of G.T, the Fortran-ordered view of the
        # C-contiguous G (no copy)
        return blas.dsymv(1.0, G.T, v, lower=1)
