"""The report's domain classifier and importance-weighted estimate (issue 47,
app.monitoring.domain) against an independent computation: the AUC against scikit-learn's on
the same out-of-fold probabilities, and the weighted estimate against the accuracy of the
window's own distribution, known here in closed form."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from app.monitoring import domain


def _reference(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Rows uniform on [0, 1]^2, predicted right with probability 0.95 - 0.5 x0, and
    calibrated: each row's confidence is that probability."""
    X = rng.random((n, 2))
    confidence = 0.95 - 0.5 * X[:, 0]
    return domain.reference_rows(X, rng.random(n) < confidence, confidence)


def test_an_unshifted_window_is_not_told_apart_and_keeps_the_reference_accuracy():
    rng = np.random.default_rng(0)
    reference = _reference(2000, rng)
    window = rng.random((1000, 2))
    found = domain.compare(reference, window, 1000, ["x0", "x1"])
    assert abs(found["auc"] - 0.5) < 0.05
    iw = found["importance_weighted"]
    assert iw["estimate"] == pytest.approx(0.70, abs=0.03)  # E[0.95 - 0.5 x0], x0 ~ U(0, 1)
    assert iw["low"] < 0.70 < iw["high"] and iw["n_effective"] > 1800


def test_a_shifted_window_is_told_apart_and_reweighted():
    rng = np.random.default_rng(1)
    reference = _reference(2000, rng)
    X = reference[0]
    # the window's x0 has density proportional to exp(2 x0) (more of the rows the model gets
    # wrong; a log density ratio linear in x0, as the logistic fit's): E[x0] = 1/(1 - e^-2)
    # - 1/2, the accuracy E[0.95 - 0.5 x0]
    u = rng.random(1000)
    window = np.c_[np.log1p(u * np.expm1(2.0)) / 2.0, rng.random(1000)]
    found = domain.compare(reference, window, 1000, ["x0", "x1"])
    mean_x0 = 1 / (1 - np.exp(-2.0)) - 0.5
    truth = 0.95 - 0.5 * mean_x0
    iw = found["importance_weighted"]
    assert iw["estimate"] == pytest.approx(truth, abs=0.03)
    assert iw["low"] < truth < iw["high"]
    assert found["top_features"][0] == "x0"
    # calibrated everywhere: the weighted calibration gap is within its error of 0
    assert abs(iw["calibration_gap"]) < 3 * iw["calibration_se"] + 1e-3
    # the AUC is scikit-learn's of the same out-of-fold fit, near the best possible one,
    # P(x0 of a window row > x0 of a reference row) = E[x0] over the window
    Xy = np.vstack([X, window])
    y = np.r_[np.zeros(2000), np.ones(1000)]
    p = cross_val_predict(LogisticRegression(class_weight="balanced", max_iter=500), Xy, y,
                          cv=StratifiedKFold(5, shuffle=True, random_state=0),
                          method="predict_proba")[:, 1]
    assert found["auc"] == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert found["auc"] == pytest.approx(mean_x0, abs=0.03)


def test_too_few_rows_give_no_comparison():
    rng = np.random.default_rng(2)
    reference = _reference(200, rng)
    assert domain.compare(reference, rng.random((domain.MIN_ROWS - 1, 2)), 49, ["a", "b"]) is None
