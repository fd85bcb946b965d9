"""The label-shift estimate (issue 47, app.monitoring.label_shift) against independent
computations: two Gaussian classes whose exact posterior is known in closed form, so a
window drawn with other class priors has a known accuracy and known priors; the priors EM
finds against scipy's bounded maximisation of the same likelihood; the interval's coverage
over many windows; and the verdict's ``label_shift`` reason on a shift the confidence-based
estimate cannot see."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from app.monitoring import label_shift, reliability

P = np.array([0.65, 0.35])  # the reference's class shares


def _posterior(x: np.ndarray) -> np.ndarray:
    """The exact P(y | x) under the reference priors: x | y ~ N(±0.5, 1) (overlapping)."""
    like = np.stack([stats.norm.pdf(x, -0.5), stats.norm.pdf(x, 0.5)], axis=1) * P
    return like / like.sum(axis=1, keepdims=True)


def _window(n: int, q1: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < q1).astype(int)
    x = rng.normal(np.where(y == 1, 0.5, -0.5), 1.0)
    return _posterior(x), y


def test_the_priors_are_the_likelihoods_maximum_and_the_accuracy_follows_them():
    rng = np.random.default_rng(0)
    proba, y = _window(4000, 0.5, rng)
    predicted = proba.argmax(axis=1)
    found = label_shift.estimate(proba, predicted, P)
    r = proba / P
    best = optimize.minimize_scalar(lambda q1: -np.sum(np.log(r @ [1 - q1, q1])),
                                    bounds=(0.0, 1.0), method="bounded",
                                    options={"xatol": 1e-9})
    assert found["method"] == "mlls" and found["n"] == 4000
    assert found["priors_window"][1] == pytest.approx(best.x, abs=1e-4)
    assert found["priors_window"][1] == pytest.approx(0.5, abs=0.05)
    assert found["p_value"] < 1e-6
    # the accuracy under the window's true priors, from the exact posterior reweighted
    w = np.array([0.5, 0.5]) / P
    adjusted = proba * w / (proba * w).sum(axis=1, keepdims=True)
    expected = float(np.mean(adjusted[np.arange(len(y)), predicted]))
    assert found["estimate"] == pytest.approx(expected, abs=0.02)
    assert found["low"] <= float(np.mean(predicted == y)) <= found["high"]
    confidence = float(np.mean(proba[np.arange(len(y)), predicted]))
    assert found["estimate"] < confidence - 0.03  # the shift lowers what CBPE would say


def test_unchanged_priors_give_the_confidence_estimate_and_a_high_p_value():
    rng = np.random.default_rng(1)
    proba, _ = _window(3000, P[1], rng)
    predicted = proba.argmax(axis=1)
    found = label_shift.estimate(proba, predicted, P)
    confidence = float(np.mean(proba[np.arange(len(predicted)), predicted]))
    assert found["estimate"] == pytest.approx(confidence, abs=0.01)
    assert found["priors_window"][1] == pytest.approx(P[1], abs=0.05)
    assert found["p_value"] > 0.01


def test_the_interval_covers_the_realised_accuracy_of_shifted_windows():
    rng = np.random.default_rng(2)
    covered = 0
    for _ in range(60):
        proba, y = _window(400, 0.5, rng)
        predicted = proba.argmax(axis=1)
        found = label_shift.estimate(proba, predicted, P)
        covered += found["low"] <= float(np.mean(predicted == y)) <= found["high"]
    assert covered >= 0.9 * 60


def test_a_label_shift_the_confidences_miss_is_a_reason():
    rng = np.random.default_rng(3)
    proba, y = _window(400, 0.6, rng)
    predicted = proba.argmax(axis=1)
    confidence = proba[np.arange(len(y)), predicted]
    cbpe = {"estimate": float(confidence.mean()), "low": 0.0, "high": 1.0,
            "label_shift": label_shift.estimate(proba, predicted, P)}
    assert abs(cbpe["estimate"] - float(np.mean(predicted == y))) > 0.05  # CBPE is off
    found = reliability.verdict(cbpe, None, 0.0)
    assert found["label_free_verdict"] == "unreliable" and found["codes"] == ["label_shift"]
    assert "had the class priors moved" in found["reasons"][0]
    # unchanged priors: reliable once the window has rows enough to show the priors did not
    # move (the classes overlap so much that 400 rows cannot: the reason then says so)
    for n, expected in ((400, "unreliable"), (4000, "reliable")):
        same = _window(n, P[1], np.random.default_rng(4))[0]
        predicted = same.argmax(axis=1)
        cbpe = {"estimate": float(same[np.arange(n), predicted].mean()), "low": 0.0,
                "high": 1.0, "label_shift": label_shift.estimate(same, predicted, P)}
        assert reliability.verdict(cbpe, None, 0.0)["label_free_verdict"] == expected, n


def test_no_rows_or_a_class_without_reference_rows_give_none():
    assert label_shift.estimate(np.zeros((0, 2)), np.zeros(0, dtype=int), P) is None
    assert label_shift.estimate(np.full((3, 2), 0.5), np.zeros(3, dtype=int),
                                np.array([1.0, 0.0])) is None


def test_a_long_window_is_estimated_on_a_bounded_subsample():
    rng = np.random.default_rng(5)
    proba, _ = _window(label_shift.ROWS + 5000, 0.5, rng)
    found = label_shift.estimate(proba, proba.argmax(axis=1), P)
    assert found["n"] == label_shift.ROWS + 5000
    assert found["priors_window"][1] == pytest.approx(0.5, abs=0.03)


def test_three_classes_match_a_constrained_maximisation_of_the_likelihood():
    rng = np.random.default_rng(6)
    priors = np.array([0.5, 0.3, 0.2])
    centres = np.array([-1.0, 0.0, 1.0])
    y = rng.choice(3, size=3000, p=[0.2, 0.3, 0.5])
    x = rng.normal(centres[y], 1.0)
    like = stats.norm.pdf(x[:, None], centres[None, :]) * priors
    proba = like / like.sum(axis=1, keepdims=True)
    predicted = proba.argmax(axis=1)
    found = label_shift.estimate(proba, predicted, priors)
    r = proba / priors
    best = optimize.minimize(lambda q: -np.sum(np.log(r @ q)), priors, method="SLSQP",
                             bounds=[(1e-9, 1.0)] * 3, constraints=[
                                 {"type": "eq", "fun": lambda q: q.sum() - 1.0}],
                             options={"ftol": 1e-12, "maxiter": 500})
    assert np.allclose(found["priors_window"], best.x, atol=2e-3)
    assert np.allclose(found["priors_window"], [0.2, 0.3, 0.5], atol=0.06)
    assert found["low"] <= float(np.mean(predicted == y)) <= found["high"]
    assert found["expected_low"] >= found["low"] and found["expected_high"] <= found["high"]
