"""Linear and exact-kernel fits allocate their arrays on the kernel's ordinary 4 KiB pages.

numpy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``) for every array of
4 MiB or more. The first write to such an array then faults in 2 MiB at a time, and the kernel
zero-fills each 2 MiB block at once. That is cheap where the memory is resident. It is not cheap
on a virtual machine whose host takes back the guest's free memory: virtio-balloon's free page
reporting (Firecracker and other cloud VMs) hands free 2 MiB blocks back to the host, so a huge
page fault tends to land on a block the host must back again, 4 KiB by 4 KiB. Ordinary pages
come from the guest's recently freed small pages, which the host still backs.

Measured on a 2-core AMD EPYC VM with free page reporting on (``/sys/module/page_reporting``,
order 9), each fit in a fresh process, alternating with the same fit on huge pages
(docs/performance.md, "Huge pages"):

- a 256 MiB array's first write: 0.4-2 GB/s on huge pages, 2.7 GB/s on small ones;
- linear, 100,000 x 2,000 sparse ("gram"): 0.99 s -> 0.80 s (medians of 10), system time
  0.18-0.35 s -> 0.06-0.10 s;
- linear, 800,000 x 28 dense ("dense"): 2.4 s -> 1.9 s, system time 0.87 s -> 0.21 s;
- exact RBF on 4,800 rows: 6.3 s -> 5.0 s, system time 1.9 s -> 0.5 s.

The low-rank and Nystrom kernel paths keep numpy's default: their arrays are smaller and freed
and taken again within the fit, where a resident huge page is cheaper than 512 small faults
(in-process fits on 10,000 x 28: 0.26 s on huge pages, 0.34 s on small ones; fresh processes:
no difference beyond the noise). LIBLINEAR and LIBSVM (the comparators) allocate with
``malloc`` and never ask for huge pages.

numpy's switch is process-wide (``_set_madvise_hugepage``, a private function of numpy's,
guarded: where it is missing nothing changes). ``small_pages`` turns it off while at least one
such fit runs in the process (fits nest: calibration fits folds; and run in threads: model
selection) and puts back what was set before when the last one ends. Arrays allocated
meanwhile by other threads get small pages too, which changes their speed, never their values.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

try:  # numpy 2
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # pragma: no cover - numpy 1.26
    try:
        from numpy.core.multiarray import _set_madvise_hugepage
    except ImportError:  # a numpy without the switch
        _set_madvise_hugepage = None

_lock = threading.Lock()
_depth = 0
_before = True


def huge_pages_enabled() -> bool | None:
    """Whether numpy now asks for huge pages for large arrays (None: numpy has no switch)."""
    if _set_madvise_hugepage is None:
        return None
    with _lock:
        now = bool(_set_madvise_hugepage(True))
        _set_madvise_hugepage(now)
    return now


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's huge pages off for the block (the module docstring says why); nests, and is
    safe across threads."""
    global _depth, _before
    if _set_madvise_hugepage is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _before = bool(_set_madvise_hugepage(False))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _set_madvise_hugepage(_before)
