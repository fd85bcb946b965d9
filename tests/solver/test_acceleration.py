"""Anderson acceleration of the fixed-point map (``MSVMAv(acceleration="anderson")``,
``solver._acceleration``): on real data it meets the objective rule in far fewer iterations
than the plain iteration, and its converged model is the plain iteration's run to convergence
(the same fixed point, not another model); the paper's rule never accelerates."""

import warnings

import numpy as np
import pytest

from solver import MSVMAv
from solver.msvmav_parameters import PAPER_STOPPING
from tests.solver.data_support import wdbc_scaled


@pytest.fixture(scope="module")
def wdbc():
    return wdbc_scaled()


def _fixed_point(X, y, **kw):
    """The plain iteration run to convergence: a tight objective rule, no acceleration."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MSVMAv(acceleration="none", tol=1e-11, max_iter=20000, **kw).fit(X, y)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_accelerated_fit_converges_to_the_plain_iterations_fixed_point(wdbc, kernel):
    X, y = wdbc
    X, y = X[:300], y[:300]
    kw = {"kernel": kernel, "approximation": "exact"} if kernel == "rbf" else {}
    ref = _fixed_point(X, y, **kw)
    assert ref.converged_
    fast = MSVMAv(acceleration="anderson", **kw).fit(X, y)
    assert fast.converged_ and fast.n_iter_ < ref.n_iter_ / 3
    assert any(h["accelerated"] == "accelerated" for h in fast.history_)
    tight = MSVMAv(acceleration="anderson", tol=1e-9, max_iter=2000, **kw).fit(X, y)
    assert tight.converged_ and tight.n_iter_ < ref.n_iter_
    coef = (lambda m: m.dual_coef_.ravel()) if kernel == "rbf" else (lambda m: m.coef_.ravel())
    # the default tol (1e-3) on J: within 1e-2 of the fixed point; a tight tol: within 1e-5
    assert _rel(coef(fast), coef(ref)) < 1e-2
    assert _rel(coef(tight), coef(ref)) < 1e-5
    J = lambda m: m.history_[-1]["objective"]  # noqa: E731
    assert abs(J(fast) - J(ref)) <= 1e-3 * J(ref)
    assert abs(J(tight) - J(ref)) <= 1e-7 * J(ref)


def test_the_papers_rule_never_accelerates(wdbc):
    X, y = wdbc
    a = MSVMAv(acceleration="anderson", **PAPER_STOPPING)
    b = MSVMAv(acceleration="none", **PAPER_STOPPING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a.fit(X, y)
        b.fit(X, y)
    assert not a.accelerated and a.n_iter_ == b.n_iter_ == 100
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert {h["accelerated"] for h in a.history_} == {"plain"}
