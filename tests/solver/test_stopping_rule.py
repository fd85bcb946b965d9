"""Convergence that means something (issue 49): the default stopping rule (the relative change
of J = SV / theta^2 over a window) is met by a default fit on real data, the paper's fixed
T = 100 stays the reproduction setting, and a fit that runs out of iterations says so."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from solver import DEFAULT_TOL, MSVMAv
from solver.internals import OBJECTIVE_WINDOW
from solver.model_selection import cross_validate_grid, kfold_indices
from solver.msvmav_parameters import PAPER_STOPPING
from tests.solver.data_support import wdbc_scaled


@pytest.fixture(scope="module")
def wdbc():
    return wdbc_scaled()


def test_objective_rule_fit_on_real_data_converges(wdbc):
    """/train's default rule (stop="objective", tol=1e-4) on wdbc, min-max scaled."""
    X, y = wdbc
    est = MSVMAv(stop="objective", tol=1e-4).fit(X, y)
    assert est.converged_ and est.n_iter_ < est.max_iter
    assert "warning" not in est.fit_info_
    # independently: the rule holds at the last iteration and not one before
    J = np.array([r["objective"] for r in est.history_])
    k, W = len(J) - 1, OBJECTIVE_WINDOW
    assert abs(J[k] - J[k - W]) <= W * est.tol * J[k]
    assert abs(J[k - 1] - J[k - 1 - W]) > W * est.tol * J[k - 1]


def test_fit_stopped_at_max_iter_warns_in_words(wdbc):
    X, y = wdbc
    est = MSVMAv(stop="objective", tol=1e-4, max_iter=10).fit(X, y)
    assert not est.converged_ and est.n_iter_ == 10
    assert "did not converge" in est.fit_info_["warning"]
    assert "max_iter=10" in est.fit_info_["warning"]


def test_paper_setting_runs_the_fixed_t(wdbc):
    X, y = wdbc
    with pytest.warns(ConvergenceWarning, match="did not converge") as caught:
        est = MSVMAv(**PAPER_STOPPING).fit(X, y)
    assert est.n_iter_ == 100 and not est.converged_  # 1e-8 on the step is not met
    assert "did not converge" in est.fit_info_["warning"]
    assert str(caught[0].message) == est.fit_info_["warning"]


def test_the_library_default_is_a_rule_a_fit_meets(wdbc):
    """MSVMAv()'s stopping rule is /train's (the objective's relative change, 1e-3), not the
    paper's, and a default linear fit meets it before max_iter without a warning."""
    X, y = wdbc
    defaults = {k: MSVMAv().get_params()[k] for k in PAPER_STOPPING}
    assert defaults == {"stop": "objective", "tol": 1e-3, "max_iter": 100}
    assert DEFAULT_TOL == 1e-3
    assert defaults != PAPER_STOPPING
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = MSVMAv().fit(X, y)
    assert est.converged_ and est.n_iter_ < 100 and "warning" not in est.fit_info_


def test_a_default_rbf_fit_meets_the_default_rule(wdbc):
    """Issue 49: with 1e-4 (the default before) a default RBF fit on wdbc ran to max_iter
    (J still falling by about 2e-4 an iteration) and warned; with the default 1e-3 it meets
    the rule, at the hold-out accuracy of the 100-iteration iterate (bench/convergence.py)."""
    X, y = wdbc
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = MSVMAv(kernel="rbf").fit(X, y)
    assert est.converged_ and est.n_iter_ < 100 and "warning" not in est.fit_info_
    J = np.array([r["objective"] for r in est.history_])
    k, W = len(J) - 1, OBJECTIVE_WINDOW  # independently: met here and not one before
    assert abs(J[k] - J[k - W]) <= W * 1e-3 * J[k]
    assert abs(J[k - 1] - J[k - 1 - W]) > W * 1e-3 * J[k - 1]
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        old = MSVMAv(kernel="rbf", tol=1e-4).fit(X, y)
    assert old.n_iter_ == 100 and not old.converged_


def test_search_cells_stop_where_the_single_fit_stops(wdbc):
    """The lockstep stack of linear settings applies the same rule as one fit."""
    X, y = wdbc
    rule = {"stop": "objective", "tol": 1e-4}
    res = cross_validate_grid("msvmav", X, y, grid={"alpha": [1.0, 16.0], "beta": [0.25]},
                              cv=2, n_jobs=1, random_state=0, params=rule)
    tr, te = kfold_indices(X.shape[0], 2, 0)[0]
    for row in res.table:
        est = MSVMAv(**row["params"], **rule).fit(X[tr], y[tr])
        assert est.n_iter_ < 100  # the rule, not the cap, stopped it
        assert row["scores"][0] == pytest.approx(est.score(X[te], y[te]), abs=1e-12)
