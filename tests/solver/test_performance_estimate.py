"""solver.performance_estimate: the expected accuracy and its interval, against a direct
computation and against simulation (rows drawn right with their calibrated probability)."""

import numpy as np
import pytest

from solver.performance_estimate import expected_accuracy


def test_estimate_is_the_mean_confidence_of_the_predicted_class():
    P = np.array([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5], [0.2, 0.8]])
    r = expected_accuracy(P)
    assert r["estimate"] == pytest.approx((0.9 + 0.7 + 0.5 + 0.8) / 4)
    assert r["n"] == 4
    # given predictions: the probability of each predicted class, even if not the largest
    r = expected_accuracy(P, y_pred_index=np.array([1, 1, 0, 0]))
    assert r["estimate"] == pytest.approx((0.1 + 0.7 + 0.5 + 0.2) / 4)


def test_interval_is_the_poisson_binomial_normal_interval():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.5, 1.0, 400)
    P = np.column_stack([p, 1 - p])
    r = expected_accuracy(P, alpha=0.05)
    sd = np.sqrt(np.sum(p * (1 - p))) / p.size
    assert r["low"] == pytest.approx(p.mean() - 1.959963984540054 * sd)
    assert r["high"] == pytest.approx(p.mean() + 1.959963984540054 * sd)


def test_realised_accuracy_of_calibrated_rows_falls_in_the_interval_about_95_percent():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.5, 1.0, 300)
    P = np.column_stack([p, 1 - p])
    r = expected_accuracy(P)
    realised = (rng.random((4000, p.size)) < p).mean(axis=1)
    coverage = np.mean((realised >= r["low"]) & (realised <= r["high"]))
    assert 0.93 <= coverage <= 0.97
    assert abs(realised.mean() - r["estimate"]) < 1e-3


def test_empty_window_and_bad_input():
    assert expected_accuracy(np.zeros((0, 3)))["estimate"] is None
    with pytest.raises(ValueError, match="proba: expected shape"):
        expected_accuracy(np.zeros(3))
    with pytest.raises(ValueError, match="y_pred_index"):
        expected_accuracy(np.full((3, 2), 0.5), y_pred_index=np.array([0, 1]))
    with pytest.raises(ValueError, match="alpha"):
        expected_accuracy(np.full((3, 2), 0.5), alpha=1.5)
