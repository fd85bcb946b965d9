"""Linear and exact-kernel fits allocate on small pages (solver/_huge_pages.py): numpy's
huge-page switch is off while such a fit runs, as the kernel sees it (no ``hg`` flag on a large
array's mapping), and is put back after, also when fits nest or run in threads; the low-rank
kernel path keeps numpy's default."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from solver import MSVMAv
from solver.internals import _set_madvise_hugepage, huge_pages_enabled, small_pages
from tests.wait_support import wait_until

pytestmark = pytest.mark.skipif(_set_madvise_hugepage is None, reason="numpy has no switch")

LARGE = 2**23  # 64 MiB of float64: its own mapping, above numpy's 4 MiB threshold


def _data(n: int = 120, d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    score = X @ rng.normal(size=d)
    return X, np.where(score > np.median(score), 1, 0)


def _advised_huge(array: np.ndarray) -> bool | None:
    """Whether the kernel records MADV_HUGEPAGE (VmFlags ``hg``) on the mapping holding the
    middle of ``array`` (numpy advises from its first 2 MiB boundary on); None where
    /proc/self/smaps is not there."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return None
    address, inside = array.ctypes.data + array.nbytes // 2, False
    for line in smaps.read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(part, 16) for part in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return "hg" in line.split()[1:]
    return None


@pytest.fixture(autouse=True)
def _huge_pages_on():
    """Every test starts with numpy's default (huge pages asked for) and leaves it so."""
    before = _set_madvise_hugepage(True)
    yield
    _set_madvise_hugepage(before)


def test_a_large_array_made_during_a_fit_is_not_advised_huge():
    outside = np.ones(LARGE)
    control = _advised_huge(outside)
    if not control:
        pytest.skip("numpy does not madvise here (kernel or /proc without it)")
    seen: list[bool | None] = []

    def allocate(info: dict) -> None:
        inside = np.ones(LARGE)
        seen.append(_advised_huge(inside))
        del inside

    MSVMAv(max_iter=3).fit(*_data(), callback=allocate)
    assert seen and not any(seen)
    assert _advised_huge(np.ones(LARGE)) is True  # after the fit: numpy's default again


def test_the_switch_is_off_during_a_fit_and_restored_after_even_when_it_raises():
    states: list[bool | None] = []
    MSVMAv(max_iter=3).fit(*_data(), callback=lambda info: states.append(huge_pages_enabled()))
    assert states and not any(states)
    assert huge_pages_enabled() is True

    def fail(info: dict) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        MSVMAv(max_iter=3).fit(*_data(), callback=fail)
    assert huge_pages_enabled() is True
    # a process that turned huge pages off keeps them off
    _set_madvise_hugepage(False)
    MSVMAv(max_iter=3).fit(*_data())
    assert huge_pages_enabled() is False


def test_nested_fits_calibration_folds_keep_it_off_until_the_outer_fit_ends():
    phases: list[tuple[str, bool | None]] = []
    MSVMAv(max_iter=3, calibration="sigmoid").fit(
        *_data(200), callback=lambda info: phases.append((info.get("phase", "fit"),
                                                          huge_pages_enabled())))
    assert {phase for phase, _ in phases} == {"fit", "calibration"}
    assert not any(state for _, state in phases)
    assert huge_pages_enabled() is True


def test_fits_in_threads_restore_it_once_the_last_one_ends():
    inside = threading.Barrier(2)
    release = threading.Event()
    states: list[bool | None] = []

    def hold(info: dict) -> None:
        if info["iteration"] == 1:
            inside.wait(timeout=30)
            states.append(huge_pages_enabled())
            release.wait(timeout=30)

    threads = [threading.Thread(target=MSVMAv(max_iter=3).fit, args=_data(seed=k),
                                kwargs={"callback": hold}) for k in range(2)]
    for thread in threads:
        thread.start()
    try:  # both fits inside their first iteration
        wait_until(lambda: len(states) == 2, timeout=30, interval=0.01)
    finally:
        release.set()
    assert states == [False, False]
    for thread in threads:
        thread.join(timeout=30)
    assert huge_pages_enabled() is True


def test_the_exact_kernel_fit_is_on_small_pages_and_the_low_rank_one_is_not():
    X, y = _data(600, d=2)  # a fast-decaying spectrum: the low-rank path keeps its factor
    seen: dict[str, list[bool | None]] = {"exact": [], "low_rank": []}
    for path in seen:
        model = MSVMAv(kernel="rbf", approximation=path, max_iter=3).fit(
            X, y, callback=lambda info, path=path: seen[path].append(huge_pages_enabled()))
        assert model.kernel_approximation_ == path
    assert seen["exact"] and not any(seen["exact"])
    assert seen["low_rank"] and all(seen["low_rank"])
    assert huge_pages_enabled() is True


def test_small_pages_alone_nests():
    with small_pages():
        with small_pages():
            assert huge_pages_enabled() is False
        assert huge_pages_enabled() is False
    assert huge_pages_enabled() is True
