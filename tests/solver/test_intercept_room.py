"""Dense rows stored beside a column of ones (``with_intercept_room``, or the service's loader):
the linear fits use that column as their intercept column instead of appending it to a copy of
the rows, with the same results."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from solver import ALGORITHMS, MSVMAv
from solver.msvmav import augment, with_intercept_room


def _room(X: np.ndarray) -> np.ndarray:
    out = with_intercept_room(*X.shape)
    out[:] = X
    return out


def _data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, np.where(X[:, :3].sum(axis=1) + 0.3 * rng.normal(size=n) > 1.5, 1, -1)


def test_augment_widens_without_copying_only_what_is_laid_out_so():
    X, _ = _data(50, 4)
    room = _room(X)
    wide = augment(room)
    assert np.shares_memory(wide, room) and not wide.flags.writeable
    np.testing.assert_array_equal(wide, np.hstack([X, np.ones((50, 1))]))
    block = augment(room[10:30])  # a block of rows (the hold-out split's training part)
    assert np.shares_memory(block, room)
    np.testing.assert_array_equal(block, np.hstack([X[10:30], np.ones((20, 1))]))
    for other in (X, room[::2], np.asfortranarray(X)):  # contiguous, strided rows, Fortran
        got = augment(other)
        assert not np.shares_memory(got, other)
        np.testing.assert_array_equal(got, np.hstack([other, np.ones((len(other), 1))]))
    spoiled = _room(X)
    spoiled.base[7, -1] = 0.5  # the column beside the rows is not all ones: copied
    assert not np.shares_memory(augment(spoiled), spoiled)
    assert augment(spoiled)[7, -1] == 1.0


@pytest.mark.parametrize("name,params", [
    ("msvmav", {"linear_solver": "dense"}), ("msvmav", {"linear_solver": "woodbury"}),
    ("msvmav", {"linear_solver": "cg"}), ("msvmav", {"linear_solver": "gram"}),
    ("odm", {"tol": 1e-12, "max_iter": 100_000}), ("mamc", {}), ("fmm", {}),
])
def test_fits_on_rows_beside_ones_equal_the_plain_ones(name, params):
    n = 200 if params.get("linear_solver") == "woodbury" else 600
    X, y = _data(n, 12)
    plain = ALGORITHMS[name](**params).fit(X, y)
    roomy = ALGORITHMS[name](**params).fit(_room(X), y)
    np.testing.assert_allclose(roomy.decision_function(X), plain.decision_function(X),
                               rtol=1e-12, atol=1e-12)


def test_the_fit_does_not_copy_rows_laid_out_beside_ones():
    X, y = _data(40_000, 40)
    room = _room(X)

    def peak(rows: np.ndarray) -> int:
        tracemalloc.start()
        try:
            MSVMAv(max_iter=3).fit(rows, y)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    saved = peak(X) - peak(room)
    assert saved > 0.8 * X.nbytes, f"saved {saved / X.nbytes:.2f}x the matrix"
