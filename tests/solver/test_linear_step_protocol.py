"""The linear step's one home: every way of solving it answers the same protocol, one name ->
class table serves the chooser, the estimator and the memory estimate (an unknown name is an
error, never a fallback), counters are named for what they count, and the margins' estimate on
"gram" never drives the step's state."""

import numpy as np
import pytest
from scipy import sparse

from solver import MSVMAv
from solver.internals import (
    LINEAR_STEPS,
    GramSystem,
    PrimalSpace,
    choose_linear_solver,
    linear_system_bytes,
    make_linear_step,
)
from solver.memory import estimate_fit
from solver.params import InvalidParameterError
from tests.solver.exact_support import planted


def test_every_linear_step_answers_the_protocol_and_solves_the_same_step():
    """Each class of the table, given the same A, w and theta, returns the delta of a direct
    solve of (c I + X_A^T X_A) delta = X_A^T (theta y_A - X_A w), counts its work under its
    own names, and says whether it followed X delta."""
    rng = np.random.default_rng(0)
    X = sparse.random(120, 40, density=0.2, format="csr", random_state=1)
    y = np.where(rng.random(120) < 0.5, 1.0, -1.0)
    c = 0.3 * 120
    mask = rng.random(120) < 0.4
    w = rng.normal(size=40)
    XA = X[mask].toarray()
    direct = np.linalg.solve(c * np.eye(40) + XA.T @ XA, XA.T @ (0.2 * y[mask] - XA @ w))
    for name, kind in LINEAR_STEPS.items():
        step = make_linear_step(name, X, y, np.full(40, c))
        assert isinstance(step, kind)
        step.set_active(mask)
        delta = step.step(w, 0.2, np.asarray(X @ w).ravel())
        assert np.allclose(delta, direct, rtol=1e-8, atol=1e-10), name
        assert step.counters and all(isinstance(v, int) for v in step.counters.values())
        assert any(step.counters.values()), name  # it counted the work it did
        moved = step.followed()
        assert moved is None or np.allclose(moved, X @ delta, atol=1e-8)
        assert kind.footprint(120, 40, X.nnz) > 0 and kind.advice


def test_the_table_is_the_one_list_of_names():
    constraint = MSVMAv._parameter_constraints["linear_solver"][0]
    assert constraint.options == {"auto", *LINEAR_STEPS}
    for name in LINEAR_STEPS:
        assert choose_linear_solver(name, 10, 10) == name
        assert estimate_fit("msvmav", 1000, 30, None, {"linear_solver": name}).path == name


@pytest.mark.parametrize("call", [
    lambda: choose_linear_solver("qr", 100, 10),
    lambda: linear_system_bytes("qr", 100, 10, None),
    lambda: make_linear_step("qr", np.ones((4, 2)), np.ones(4), np.ones(2)),
    # the space once turned any name it did not know into "woodbury"
    lambda: PrimalSpace(np.eye(4), np.array([1.0, -1.0, 1.0, 1.0]), 0.25,
                        shift=np.ones(4), solver="qr"),
])
def test_an_unknown_linear_step_is_an_error_not_woodbury(call):
    with pytest.raises(ValueError, match="linear_solver: unknown linear step 'qr'"):
        call()


def test_row_space_step_refuses_a_non_identity_metric():
    with pytest.raises(ValueError, match="identity metric"):
        make_linear_step("woodbury", np.ones((4, 2)), np.ones(4), np.array([1.0, 2.0]))


def test_update_names_the_dense_system_not_a_linear_solver():
    rng = np.random.default_rng(2)
    X, y = rng.random((80, 4)), rng.integers(0, 2, 80)
    incremental = MSVMAv(update="incremental", linear_solver="dense").fit(X, y)
    rebuild = MSVMAv(update="rebuild", linear_solver="dense").fit(X, y)
    assert np.max(np.abs(incremental.decision_function(X) - rebuild.decision_function(X))) < 1e-10
    assert rebuild.fit_info_["inverse_builds"] == rebuild.n_iter_
    assert incremental.fit_info_["inverse_updates"] > 0
    with pytest.raises(InvalidParameterError, match="update"):
        MSVMAv(update="woodbury").fit(X, y)  # the old spelling, the linear_solver's name


def test_margin_estimate_never_sets_the_steps_active_set(monkeypatch):
    """On "gram" the bounds decide A and the semi-variance without touching the step: its
    active set is set once per step, by the step (the estimate once set it too), and
    ``moments`` leaves every array of the system as it was."""
    calls = []
    original = GramSystem.set_active
    monkeypatch.setattr(GramSystem, "set_active",
                        lambda self, mask: calls.append(1) or original(self, mask))
    X, y = planted()
    m = MSVMAv(max_iter=40, tol=0.0).fit(X, y)
    assert m.linear_solver_ == "gram" and m.n_iter_ == 40
    assert len(calls) == 40
    # the bounds' own counts: a few passes over X (the start's and the bounds'), not 41
    assert 2 <= m.fit_info_["margin_passes"] <= 20 and m.fit_info_["margin_rows_exact"] > 0
    system = GramSystem(X, np.where(y > 0, 1.0, -1.0), 0.25 * X.shape[0])
    rng = np.random.default_rng(3)
    mask = rng.random(X.shape[0]) < 0.5
    system.set_active(mask)
    before = {k: np.copy(v) for k, v in vars(system).items() if isinstance(v, np.ndarray)}
    ref_before = np.copy(system.ref.G)
    other = mask.copy()
    other[:20] = ~other[:20]
    w = rng.normal(size=X.shape[1])
    squares, signed, product = system.moments(other, w)
    XM = X[other].toarray()
    assert np.allclose(product, XM.T @ (XM @ w), rtol=1e-10, atol=1e-10)
    assert squares == pytest.approx(float(np.sum((XM @ w) ** 2)), rel=1e-10)
    assert signed == pytest.approx(float((XM.T @ np.where(y > 0, 1.0, -1.0)[other]) @ w),
                                   rel=1e-10)
    assert all(np.array_equal(v, getattr(system, k)) for k, v in before.items())
    assert np.array_equal(ref_before, system.ref.G)
