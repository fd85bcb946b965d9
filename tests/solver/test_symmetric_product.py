"""The "gram" path's G v (solver/_symmetric_product.py): dsymv on one or on the fit's BLAS
threads, the faster as timed, threads tried only where a core is idle; against G v formed from
the whole symmetric matrix."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import sparse
from threadpoolctl import threadpool_info, threadpool_limits

from solver import MSVMAv
from solver.internals import PROBES, RECHECK, SymmetricProduct, spare_cores
from solver.internals import symmetric_product as product_module
from tests.wait_support import wait_until


def symmetric(D: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.random((D, D))
    return A + A.T


def blas_counts() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


class PacedClock:
    """A clock under which the k-th product on t threads takes ``cost[t][k % len(cost[t])]``,
    t read from the product (``current``) at the product's end (two readings a product)."""

    def __init__(self, cost: dict[int, list[float]]) -> None:
        self.cost, self.now, self.product, self.readings = cost, 0.0, None, 0
        self.made = {threads: 0 for threads in cost}

    def __call__(self) -> float:
        if self.readings % 2 == 1:  # the end of a product
            threads = self.product.current
            costs = self.cost[threads]
            self.now += costs[self.made[threads] % len(costs)]
            self.made[threads] += 1
        self.readings += 1
        return self.now


@pytest.mark.parametrize("threads", [1, 2])
def test_product_equals_the_whole_matrix_product_reading_the_upper_triangle(threads,
                                                                              monkeypatch):
    monkeypatch.setattr(product_module, "spare_cores", lambda: threads)  # a core to try
    G = symmetric()
    v = np.random.default_rng(1).normal(size=G.shape[0])
    expected = G @ v
    G[np.tril_indices(G.shape[0], -1)] = np.nan  # the lower triangle is never read
    product = SymmetricProduct(threads)
    before = blas_counts()
    for _ in range(2 * PROBES + 4):
        assert np.allclose(product(G, v), expected, rtol=1e-13, atol=1e-11)
    assert blas_counts() == before  # the thread counts it changed are restored
    assert product.calls == 2 * PROBES + 4
    assert (product.threaded > 0) == (threads > 1)


def test_the_faster_setting_is_taken_and_the_other_timed_again_ever_less_often(monkeypatch):
    monkeypatch.setattr(product_module, "spare_cores", lambda: 1)
    clock = PacedClock({1: [3.0], 2: [1.0]})
    product = SymmetricProduct(2, clock=clock)
    clock.product = product
    G, v = symmetric(50), np.ones(50)
    settings = []
    for _ in range(2 * PROBES + 4 * RECHECK):
        product(G, v)
        settings.append(product.current)
    assert settings[:2 * PROBES] == [1, 2] * PROBES  # both timed first, alternating
    after = settings[2 * PROBES:]
    singles = [k for k, s in enumerate(after) if s == 1]
    assert singles == [RECHECK, 3 * RECHECK]  # then after RECHECK, then 2 RECHECK more
    assert product.threaded == len(settings) - PROBES - len(singles)


def test_the_choice_moves_when_the_timings_do(monkeypatch):
    """Threads win first, then (another process took the second core) lose: the product goes
    back to one thread, by the mean of the last timings, a slow product among fast ones
    included."""
    monkeypatch.setattr(product_module, "spare_cores", lambda: 1)
    clock = PacedClock({1: [3.0], 2: [1.0]})
    product = SymmetricProduct(2, clock=clock)
    clock.product = product
    G, v = symmetric(50), np.ones(50)
    for _ in range(2 * PROBES + 2):
        product(G, v)
    assert product.current == 2
    clock.cost[2] = [1.0, 1.0, 1.0, 1.0, 21.0]  # mean 5 > 3, though the median is 1
    for _ in range(3 * RECHECK):
        product(G, v)
    assert product.current == 1
    assert product.taken == 1


def test_one_thread_never_touches_the_blas_libraries(monkeypatch):
    monkeypatch.setattr(product_module, "spare_cores", lambda: 8)
    product = SymmetricProduct(1)
    assert product.libs == [] and product.threads == 1
    G = symmetric(40)
    for _ in range(10):
        product(G, np.ones(40))
    assert product.threaded == 0


def test_no_idle_core_means_one_thread(monkeypatch):
    monkeypatch.setattr(product_module, "spare_cores", lambda: 0)
    assert SymmetricProduct(4).threads == 1
    monkeypatch.setattr(product_module, "spare_cores", lambda: 1)
    assert SymmetricProduct(4).threads == 2
    assert SymmetricProduct(4, product_module.THREADED_MIN_DIM - 1).threads == 1  # a small G


def fake_tasks(root, states: list[str]):
    """A /proc/self/task of threads in the given states (one with a comm holding ") R (")."""
    root.mkdir(exist_ok=True)
    for tid, state in enumerate(states, start=100):
        (root / str(tid)).mkdir()
        (root / str(tid) / "stat").write_text(f"{tid} (odd) R (name) {state} 1 2 3\n")
    return str(root)


def test_spare_cores_counts_other_processes_runnable_threads(tmp_path):
    path = tmp_path / "loadavg"
    cores = os.cpu_count() or 1
    alone = fake_tasks(tmp_path / "alone", ["R"])  # the reader
    spinning = fake_tasks(tmp_path / "spinning", ["R", "R", "R", "S"])  # + 2 BLAS threads
    path.write_text("0.50 0.40 0.30 1/200 1234\n")
    assert spare_cores(str(path), alone) == cores - 1
    path.write_text("0.50 0.40 0.30 3/200 1234\n")
    assert spare_cores(str(path), spinning) == cores - 1  # all three running are ours
    assert spare_cores(str(path), alone) == max(0, cores - 3)  # two are another process's
    assert spare_cores(str(path), str(tmp_path / "no-tasks")) == max(0, cores - 3)
    path.write_text(f"9.00 9.00 9.00 {cores + 3}/200 1234\n")
    assert spare_cores(str(path), alone) == 0
    path.write_text("garbled\n")
    assert spare_cores(str(path), alone) == 0
    assert spare_cores(str(tmp_path / "missing"), alone) == 0


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs /proc/loadavg")
def test_busy_cores_leave_no_spare_one():
    """Real processes spinning on every core: the kernel counts them runnable."""
    cores = os.cpu_count() or 1
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(cores)]
    try:
        # until the kernel has them runnable
        wait_until(lambda: spare_cores() == 0, timeout=10, interval=0.02)
        assert SymmetricProduct(2).threads == 1
    finally:
        for proc in spin:
            proc.kill()
            proc.wait()


def test_gram_fits_agree_on_one_thread_and_on_two(monkeypatch):
    monkeypatch.setattr(product_module, "THREADED_MIN_DIM", 1)
    """The fit's decisions do not depend on the products' threads (their sums are ordered
    differently: rounding apart); under a one-thread limit no product is threaded."""
    monkeypatch.setattr(product_module, "spare_cores", lambda: 1)
    X = sparse.random(4000, 900, density=0.02, format="csr", random_state=3)
    y = np.where(np.asarray(X[:, :60].sum(axis=1)).ravel() > 0.3, 1, -1)
    with threadpool_limits(1):
        one = MSVMAv(linear_solver="gram", max_iter=30).fit(X, y)
    two = MSVMAv(linear_solver="gram", max_iter=30).fit(X, y)
    assert one.fit_info_["threaded_products"] == 0
    assert two.fit_info_["threaded_products"] >= PROBES  # at least its first timings
    assert np.allclose(one.decision_function(X), two.decision_function(X), rtol=0, atol=1e-10)
