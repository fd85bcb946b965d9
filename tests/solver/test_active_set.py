"""The maintained inverses equal direct inverses after many mixed additions and removals."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_info, threadpool_limits

from solver.internals import THREADED_MIN_DIM, DualSystem, PrimalSystem
from solver.internals import active_set as active_set


def random_masks(n, steps, rng, start_share=0.4):
    mask = rng.random(n) < start_share
    yield mask.copy()
    for _ in range(steps):
        flip = rng.choice(n, size=rng.integers(1, 6), replace=False)
        mask[flip] = ~mask[flip]
        if not mask.any():
            mask[0] = True
        yield mask.copy()


def check_dual(system, mask, K, Binv, c):
    """S equals the direct inverse of (c I + P_AA), P = K (I + K)^{-1} K, in slot order."""
    idx = system.idx
    assert sorted(idx.tolist()) == np.flatnonzero(mask).tolist()
    P = K - np.eye(K.shape[0]) + Binv
    direct = np.linalg.inv(c * np.eye(idx.size) + P[np.ix_(idx, idx)])
    used = system.used  # S_A^{-1}: S's rows and columns of the used slots
    assert np.allclose(system.S[np.ix_(used, used)], direct, rtol=1e-9, atol=1e-12)
    free = system.slot_idx < 0  # free slots take no part in any product
    assert not system.S[free].any() and not system.S[:, free].any()
    if system.packed:  # each used slot packs its row of [K | (I + K)^{-1}]
        assert np.array_equal(system.R[system.used], np.hstack([system.K, system.Binv])[idx])
    assert np.allclose(system.Binv, Binv, atol=1e-12)


def primal_system(rng, n, d, *, density):
    """A PrimalSystem on random sparse rows, with c = 0.1 n."""
    X = sparse.random(n, d, density=density, format="csr", random_state=rng.integers(1000))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    base = np.full(d, n * 0.1)
    return PrimalSystem(X, y, base), X, y, base


def check_primal(system, mask, X, y, base):
    """G, s_A and M equal X_A^T X_A, X_A^T y_A and (diag(base) + G)^{-1} computed directly."""
    XA = X[mask].toarray()
    assert np.allclose(system.G, XA.T @ XA, atol=1e-9)
    assert np.allclose(system.sA, XA.T @ y[mask], atol=1e-10)
    assert np.allclose(system.M, np.linalg.inv(np.diag(base) + XA.T @ XA), rtol=1e-9,
                       atol=1e-13)


def test_dual_system_inverse_tracks_direct_inverse():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    K = rbf_kernel(X, gamma=0.4)
    c = 120 * 0.05
    system = DualSystem(DualSystem.pair(K.copy()), c)
    Binv = np.linalg.inv(np.eye(120) + K)
    # the identity behind the |A|-space step: K (I + K)^{-1} K = K - I + (I + K)^{-1}
    assert np.allclose(K - np.eye(120) + Binv, K @ Binv @ K, atol=1e-10)
    for mask in random_masks(120, 60, rng):
        system.set_active(mask)
        check_dual(system, mask, K, Binv, c)
    # the update path, not refactorisation, did the work
    assert system.counters["inverse_updates"] > 40


def test_primal_system_inverse_tracks_direct_inverse():
    rng = np.random.default_rng(1)
    system, X, y, base = primal_system(rng, 300, 30, density=0.2)
    for mask in random_masks(300, 60, rng):
        system.set_active(mask)
        check_primal(system, mask, X, y, base)
    assert system.counters["inverse_updates"] > 40


def test_dual_system_frees_slots_and_compacts_as_the_active_set_shrinks():
    rng = np.random.default_rng(3)
    n = 200
    K = rbf_kernel(rng.normal(size=(n, 3)), gamma=0.5)
    Binv = np.linalg.inv(np.eye(n) + K)
    c = n * 0.1
    system = DualSystem(DualSystem.pair(K.copy()), c)
    mask = np.zeros(n, dtype=bool)
    mask[:150] = True
    system.set_active(mask)
    widest = system.S.shape[0]
    members = list(range(150))
    while len(members) > 40:  # two rows leave per step: edits, not refactorisations
        for i in rng.choice(members, size=2, replace=False):
            members.remove(i)
            mask[i] = False
        system.set_active(mask)
        check_dual(system, mask, K, Binv, c)
    assert system.S.shape[0] < widest  # freed slots were compacted away
    for i in range(150, 200):  # rows enter one at a time, past the spare slots
        mask[i] = True
        system.set_active(mask)
        check_dual(system, mask, K, Binv, c)
    assert system.counters["inverse_builds"] == 1 and system.counters["inverse_updates"] > 100


def test_primal_system_large_sparse_changes_match_direct():
    rng = np.random.default_rng(4)
    system, X, y, base = primal_system(rng, 3000, 12, density=0.3)
    for share in (0.3, 0.6, 0.2, 0.5):  # hundreds of rows enter and leave at once
        mask = rng.random(3000) < share
        system.set_active(mask)
        check_primal(system, mask, X, y, base)


def test_dual_system_steps_agree_when_most_rows_are_active_and_rows_stop_being_packed():
    rng = np.random.default_rng(6)
    n = 100
    K = rbf_kernel(rng.normal(size=(n, 3)), gamma=0.3)
    B = np.eye(n) + K
    Binv = np.linalg.inv(B)
    c = n * 0.2
    system = DualSystem(DualSystem.pair(K.copy()), c)
    order = rng.permutation(n)
    sizes = list(range(30, 90, 4)) + list(range(90, 26, -4))
    modes = set()
    for size in sizes:
        mask = np.zeros(n, dtype=bool)
        mask[order[:size]] = True
        system.set_active(mask)
        modes.add(system.packed)
        check_dual(system, mask, K, Binv, c)
        # the step against the paper's n x n system:
        # (K_{:A} K_{A:} / c + K + I) delta = K_{:A} e_A / c
        e = rng.normal(size=n)
        delta, Kdelta = system.solve(e)
        KA = K[:, mask]
        direct = np.linalg.solve(KA @ KA.T / c + B, KA @ e[mask] / c)
        assert np.allclose(delta, direct, rtol=1e-9, atol=1e-12)
        assert np.allclose(Kdelta, K @ direct, rtol=1e-9, atol=1e-12)
    assert modes == {True, False}  # above 60 % of the rows, the rows of A are not packed
    assert system.counters["inverse_updates"] > 20


def blas_threads() -> int:
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


@pytest.mark.parametrize("spare,expected", [(0, 1), (1, 2)])
def test_kernel_inverse_takes_a_second_thread_only_where_a_core_is_idle(monkeypatch, spare,
                                                                        expected):
    """The inverse of I + K runs on the fit's two threads only where spare_cores finds a core
    idle (on a busy machine a descheduled partner thread made it 4x slower), and on one below
    THREADED_MIN_DIM rows; seen from inside the blocked inverse, between its blocks."""
    monkeypatch.setattr(active_set, "spare_cores", lambda: spare)
    rng = np.random.default_rng(7)
    n = THREADED_MIN_DIM
    K = rbf_kernel(rng.normal(size=(n, 3)), gamma=0.5)
    seen: list[int] = []
    with threadpool_limits(2, user_api="blas"):
        assert active_set.inverse_threads(n) == expected
        assert active_set.inverse_threads(n - 1) == 1
        _, Binv = DualSystem.pair(K, check=lambda done: seen.append(blas_threads()))
        after = blas_threads()
    assert seen and set(seen) == {expected}
    assert after == 2  # the limit is the inverse's only
    assert np.allclose(Binv @ (np.eye(n) + K), np.eye(n), atol=1e-9)
