"""The maintained inverses equal direct inverses after many mixed additions and removals."""

import numpy as np
from scipy import sparse
from sklearn.metrics.pairwise import rbf_kernel

from solver._active_set import DualSystem, PrimalSystem


def random_masks(n, steps, rng, start_share=0.4):
    mask = rng.random(n) < start_share
    yield mask.copy()
    for _ in range(steps):
        flip = rng.choice(n, size=rng.integers(1, 6), replace=False)
        mask[flip] = ~mask[flip]
        if not mask.any():
            mask[0] = True
        yield mask.copy()


def test_dual_system_inverse_tracks_direct_inverse():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    K = rbf_kernel(X, gamma=0.4)
    c = 120 * 0.05
    system = DualSystem(DualSystem.pair(K.copy()), c)
    Binv = np.linalg.inv(np.eye(120) + K)
    P = K - np.eye(120) + Binv  # = K (I + K)^{-1} K
    assert np.allclose(P, K @ Binv @ K, atol=1e-10)
    for mask in random_masks(120, 60, rng):
        system.set_active(mask)
        idx = system.idx
        assert sorted(idx.tolist()) == np.flatnonzero(mask).tolist()
        direct = np.linalg.inv(c * np.eye(idx.size) + P[np.ix_(idx, idx)])
        assert np.allclose(system.Sinv, direct, rtol=1e-9, atol=1e-12)
        # the packed rows are [K | (I + K)^{-1}] rows of A, in the same order
        assert np.allclose(system.R[system.used], np.hstack([K, Binv])[idx])
        # free slots take no part in any product
        free = system.slot_idx < 0
        assert not system.S[free].any() and not system.S[:, free].any()
    assert system.n_updates > 40  # the update path, not refactorisation, did the work


def test_primal_system_inverse_tracks_direct_inverse():
    rng = np.random.default_rng(1)
    X = sparse.random(300, 30, density=0.2, format="csr", random_state=2)
    y = np.where(rng.random(300) < 0.5, 1.0, -1.0)
    base = np.full(30, 300 * 0.1)
    system = PrimalSystem(X, y, base)
    for mask in random_masks(300, 60, rng):
        system.set_active(mask)
        XA = X[mask].toarray()
        assert np.allclose(system.G, XA.T @ XA, atol=1e-10)
        assert np.allclose(system.sA, XA.T @ y[mask], atol=1e-10)
        assert np.allclose(system.M, np.linalg.inv(np.diag(base) + XA.T @ XA), rtol=1e-9,
                           atol=1e-13)
    assert system.n_updates > 40
