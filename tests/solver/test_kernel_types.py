"""The kernel types (solver.kernels, issue 43: "a Kernel in the solver instead of string
comparisons"): each kernel's matrix, diagonal, Gram matrix, gradient, cost and formula, checked
against independent computations (the formula from its definition, gradients by central
differences, scikit-learn's pairwise kernels for the formula)."""

import numpy as np
import pytest
from scipy import sparse

from solver.kernels import (
    KERNELS,
    RBF,
    Linear,
    NumpyOps,
    Poly,
    Precomputed,
    kernel_type,
    make_kernel,
)

FEATURE_KERNELS = [Linear(), RBF(0.7), Poly(0.5, 3, 1.0), Poly(0.3, 2, 0.0)]


@pytest.fixture
def rows():
    rng = np.random.default_rng(4)
    return rng.random((9, 5)), rng.random((6, 5))


def _by_definition(kernel, X, Z) -> np.ndarray:
    """k(x, z) written out pair by pair, as the module doc defines each kernel."""
    out = np.empty((len(X), len(Z)))
    for i, x in enumerate(X):
        for j, z in enumerate(Z):
            if isinstance(kernel, RBF):
                out[i, j] = np.exp(-kernel.gamma * np.sum((x - z) ** 2))
            elif isinstance(kernel, Poly):
                out[i, j] = (kernel.gamma * x @ z + kernel.coef0) ** kernel.degree
            else:
                out[i, j] = x @ z
    return out


@pytest.mark.parametrize("kernel", FEATURE_KERNELS, ids=repr)
def test_matrix_diagonal_and_formula_agree_with_the_definition(kernel, rows):
    X, Z = rows
    expected = _by_definition(kernel, X, Z)
    assert np.allclose(kernel.matrix(X, Z), expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(kernel.formula(NumpyOps(X, Z)), expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(kernel.diagonal(X), np.diag(_by_definition(kernel, X, X)), rtol=1e-12)
    # CSR rows give the same values
    assert np.allclose(kernel.matrix(sparse.csr_matrix(X), Z), expected, rtol=1e-12)
    assert np.allclose(kernel.diagonal(sparse.csr_matrix(X)), kernel.diagonal(X), rtol=1e-12)


@pytest.mark.parametrize("kernel", FEATURE_KERNELS, ids=repr)
def test_gram_is_exactly_symmetric_and_the_blocked_one_the_same(kernel, rows):
    X, _ = rows
    K = kernel.gram(X)
    assert np.array_equal(K, K.T)
    assert np.allclose(K, _by_definition(kernel, X, X), rtol=1e-12, atol=1e-12)
    done: list[int] = []
    assert np.allclose(kernel.gram(X, check=done.append), K, rtol=1e-12, atol=1e-12)
    assert done[-1] == X.shape[0]


@pytest.mark.parametrize("kernel", FEATURE_KERNELS, ids=repr)
def test_expansion_gradient_matches_central_differences(kernel, rows):
    X, Z = rows
    A = np.random.default_rng(1).normal(size=(len(Z), 2))
    G = kernel.expansion_gradient(X, Z, A)
    assert G.shape == (len(X), X.shape[1], 2)
    h = 1e-6
    for j in range(X.shape[1]):
        step = np.zeros(X.shape[1])
        step[j] = h
        numeric = (_by_definition(kernel, X + step, Z) @ A
                   - _by_definition(kernel, X - step, Z) @ A) / (2 * h)
        assert np.allclose(G[:, j, :], numeric, rtol=1e-6, atol=1e-7)


def test_precomputed_takes_the_values_as_given():
    K = np.array([[2.0, 1.0], [1.0 + 1e-17, 3.0]])
    kernel = Precomputed()
    assert kernel.gram(K)[1, 0] == kernel.gram(K)[0, 1]
    assert not kernel.on_features and kernel.entry_work(50) == 0
    with pytest.raises(ValueError, match="square"):
        kernel.gram(np.ones((2, 3)))
    with pytest.raises(ValueError, match="precomputed"):
        kernel.diagonal(K)
    with pytest.raises(ValueError, match="no formula"):
        kernel.formula(NumpyOps(K, K))


def test_names_resolve_to_types_and_parameters():
    assert KERNELS == ("linear", "rbf", "poly", "precomputed")
    assert [kernel_type(name).name for name in KERNELS] == list(KERNELS)
    assert kernel_type("linear").primal and not kernel_type("rbf").primal
    assert make_kernel("poly", gamma=0.5, degree=2, coef0=0.0) == Poly(0.5, 2, 0.0)
    assert make_kernel("linear", gamma=None) == Linear()
    assert make_kernel("rbf", gamma=2).params() == {"gamma": 2.0}
    assert Linear().entry_work(7) == RBF(1.0).entry_work(7) == 7
    with pytest.raises(ValueError, match="unknown kernel 'sigmoid'"):
        kernel_type("sigmoid")
    with pytest.raises(ValueError, match="gamma: the rbf kernel needs a width"):
        make_kernel("rbf")
