"""The exact kernel's cancellable set-up (issue 28 point 8): the inverse of I + K by the
blocked symmetric sweep against numpy's inverse, its checks between blocks, and the exact fit
with a callback (blocked Gram matrix and inverse) against the fit without one (LAPACK)."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from solver import MSVMAv
from solver.internals import spd_inverse_blocked, sweep_block


def spd(n: int, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).random((n, 6))
    return rbf_kernel(X, gamma=0.7) + np.eye(n)


@pytest.mark.parametrize(("n", "block"), [(1, 4), (7, 3), (130, 32), (500, 64), (300, None)])
def test_the_blocked_sweep_is_the_inverse(n, block):
    A = spd(n)
    reference = np.linalg.inv(A)
    done: list[int] = []
    out = spd_inverse_blocked(A.copy(), check=done.append, block=block)
    assert np.abs(out - reference).max() <= 1e-12 * np.abs(reference).max()
    assert np.array_equal(out, out.T)
    step = block or sweep_block(n)
    assert done == list(range(step, n, step)) + [n]


def test_an_exception_from_the_check_stops_the_sweep_after_one_block():
    class CancelledError(Exception):
        pass

    calls: list[int] = []

    def check(done: int) -> None:
        calls.append(done)
        raise CancelledError

    with pytest.raises(CancelledError):
        spd_inverse_blocked(spd(400), check=check, block=50)
    assert calls == [50]


def test_a_matrix_that_is_not_positive_definite_is_refused():
    A = spd(50)
    A[10, 10] = -5.0
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        spd_inverse_blocked(A, block=16)
    assert sweep_block(100) == 512 and sweep_block(20_000) == 32


def test_the_exact_fit_with_a_callback_equals_the_fit_without_and_reports_its_set_up():
    rng = np.random.default_rng(1)
    X = rng.random((600, 5))
    y = np.where(X[:, 0] + 0.2 * rng.normal(size=600) > 0.5, 1, -1)
    plain = MSVMAv(kernel="rbf", approximation="exact", max_iter=30, tol=0).fit(X, y)
    seen: list[dict] = []
    reported = MSVMAv(kernel="rbf", approximation="exact", max_iter=30, tol=0).fit(
        X, y, callback=seen.append)
    stages = [s for s in seen if s.get("stage") == "kernel_inverse"]
    assert stages and stages[-1]["done"] == 600 and stages[-1]["of"] == 600
    assert all(s["iteration"] == 0 for s in stages)
    assert sum(1 for s in seen if "theta" in s) == 30
    d0, d1 = plain.decision_function(X), reported.decision_function(X)
    assert np.abs(d0 - d1).max() <= 1e-9 * np.abs(d0).max()
    assert [h["active"] for h in plain.history_] == [h["active"] for h in reported.history_]


def test_large_active_set_refactorisations_report_between_blocks(monkeypatch):
    """The exact path's |A| x |A| refactorisations (|A| up to about n / 2) are taken in blocks
    that report too, with the last iteration's record, when they are large."""
    from solver.internals import linalg as linalg_module

    monkeypatch.setattr(linalg_module, "CHECKED_MIN", 64)
    rng = np.random.default_rng(2)
    X = rng.random((400, 5))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=400) > 0.5, 1, -1)
    seen: list[dict] = []
    reported = MSVMAv(kernel="rbf", approximation="exact", max_iter=10, tol=0).fit(
        X, y, callback=seen.append)
    plain = MSVMAv(kernel="rbf", approximation="exact", max_iter=10, tol=0).fit(X, y)
    refactors = [s for s in seen if s.get("stage") == "active_set"]
    assert refactors and all(s["done"] > 0 for s in refactors)
    d0, d1 = plain.decision_function(X), reported.decision_function(X)
    assert np.abs(d0 - d1).max() <= 1e-9 * np.abs(d0).max()
