"""solver.label_margins, the one formula of a row's margin for a class (the estimator's
margin_vector and every door's ``margin``), against a row-by-row computation."""

from __future__ import annotations

import numpy as np

from solver import label_margins


def test_binary_margin_is_the_signed_decision() -> None:
    f = np.array([0.5, -1.25, 0.0, 2.0])
    index = np.array([1, 0, 1, 0])
    expected = [(1.0 if k == 1 else -1.0) * v for v, k in zip(f, index, strict=True)]
    np.testing.assert_array_equal(label_margins(f, index), expected)


def test_multiclass_margin_is_own_minus_the_best_other() -> None:
    rng = np.random.default_rng(0)
    D = rng.normal(size=(50, 4))
    index = rng.integers(0, 4, size=50)
    expected = [D[i, k] - max(D[i, j] for j in range(4) if j != k)
                for i, k in enumerate(index)]
    np.testing.assert_allclose(label_margins(D, index), expected, rtol=0, atol=0)
    assert np.all(label_margins(D, D.argmax(axis=1)) >= 0)  # the best class: never negative
