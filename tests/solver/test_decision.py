"""solver.decision: rules against scikit-learn's threshold classes and brute force, and the
out-of-fold values a calibrated fit keeps for them."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, make_scorer
from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV

from solver import MSVMAv
from solver.decision import (
    RuleError,
    apply_rule,
    candidate_thresholds,
    check_objective,
    check_rule,
    fit_rule,
)


@pytest.fixture(scope="module")
def scored():
    X, y = make_classification(600, n_features=8, weights=[0.7], random_state=0)
    lr = LogisticRegression().fit(X[:300], y[:300])
    return lr, X[300:], y[300:], lr.predict_proba(X[300:])


def _neg_cost(fp_cost: float, fn_cost: float):
    def score(y_true, y_pred):
        _, fp, fn, _ = confusion_matrix(y_true, y_pred, labels=[0, 1]).ravel()
        return -(fp_cost * fp + fn_cost * fn)

    return make_scorer(score)


@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5, 0.8])
def test_threshold_rule_is_fixed_threshold_classifier(scored, threshold):
    lr, X, _, P = scored
    fixed = FixedThresholdClassifier(FrozenEstimator(lr), threshold=threshold,
                                     response_method="predict_proba").fit(X, np.arange(len(X)) % 2)
    rule = check_rule({"kind": "threshold", "class_index": 1, "threshold": threshold}, 2)
    np.testing.assert_array_equal(apply_rule(rule, P), fixed.predict(X))


@pytest.mark.parametrize(("fp", "fn"), [(1, 5), (5, 1), (1, 1)])
def test_cost_threshold_is_tuned_threshold_classifiers_on_the_same_rows(scored, fp, fn):
    """On the rows it is fitted on, the chosen threshold's cost is TunedThresholdClassifierCV's
    best over every distinct probability (one split: the rows themselves, no refit)."""
    lr, X, y, P = scored
    rule = fit_rule(check_objective({"cost_fp": fp, "cost_fn": fn}, 2), P, y)
    rows = np.arange(len(y))
    tuned = TunedThresholdClassifierCV(
        FrozenEstimator(lr), scoring=_neg_cost(fp, fn), cv=[(rows, rows)], refit=False,
        thresholds=candidate_thresholds(P[:, 1])).fit(X, y)
    ours = apply_rule(rule, P)
    cost = fp * np.sum((ours == 1) & (y == 0)) + fn * np.sum((ours == 0) & (y == 1))
    assert -cost == pytest.approx(tuned.best_score_)
    # brute force: no threshold does better on these rows
    brute = min(fp * np.sum((P[:, 1] >= t) & (y == 0)) + fn * np.sum((P[:, 1] < t) & (y == 1))
                for t in np.unique(P[:, 1]))
    assert cost == brute


@pytest.mark.parametrize(("target", "value"),
                         [("recall", 0.9), ("precision", 0.8), ("fpr", 0.05)])
def test_target_threshold_meets_the_target_with_most_positives(scored, target, value):
    _, _, y, P = scored
    rule = fit_rule(check_objective({"target": target, "value": value}, 2), P, y)
    t = rule["threshold"]

    def rate(th):
        said, truth = P[:, 1] >= th, y == 1
        if target == "recall":
            return np.sum(said & truth) / np.sum(truth)
        if target == "precision":
            return np.sum(said & truth) / max(np.sum(said), 1)
        return np.sum(said & ~truth) / np.sum(~truth)

    ok = (lambda r: r >= value) if target != "fpr" else (lambda r: r <= value)
    assert ok(rate(t))
    # every threshold that predicts more positives misses the target
    lower = np.unique(P[:, 1])
    lower = lower[lower < t]
    if target == "recall":  # recall: the highest threshold meeting it (most precise)
        higher = np.unique(P[:, 1])
        assert not any(ok(rate(h)) for h in higher[higher > t])
    else:
        assert not any(ok(rate(low)) for low in lower)


def test_cost_matrix_is_the_bayes_rule():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(3), size=200)
    C = [[0, 1, 4], [2, 0, 1], [8, 3, 0]]
    rule = check_rule({"kind": "cost", "matrix": C}, 3)
    expected = [min(range(3), key=lambda j, p=p: sum(p[i] * C[i][j] for i in range(3)))
                for p in P]
    np.testing.assert_array_equal(apply_rule(rule, P), expected)


def test_multiclass_threshold_falls_back_to_the_most_probable_other_class():
    P = np.array([[0.5, 0.3, 0.2], [0.2, 0.25, 0.55], [0.6, 0.1, 0.3]])
    rule = check_rule({"kind": "threshold", "class_index": 1, "threshold": 0.25}, 3)
    np.testing.assert_array_equal(apply_rule(rule, P), [1, 1, 0])


@pytest.mark.parametrize(("objective", "field"), [
    ({"cost_fp": -1, "cost_fn": 5}, "cost_fp"),
    ({"cost_fp": 1, "cost_fn": float("nan")}, "cost_fn"),
    ({"cost_fp": 0, "cost_fn": 0}, "cost_fp"),
    ({"cost_matrix": [[0, 1], [1]]}, "cost_matrix[1]"),
    ({"cost_matrix": [[0, 1], [1, 0], [1, 1]]}, "cost_matrix"),
    ({"cost_matrix": [[0, float("inf")], [1, 0]]}, "cost_matrix[0][1]"),
    ({"target": "f1", "value": 0.5}, "target"),
    ({"target": "recall", "value": 1.5}, "value"),
    ({"target": "recall", "value": 0.5, "positive": 2}, "positive"),
    ({"cost_fp": 1, "cost_fn": 1, "target": "recall", "value": 0.5}, "objective"),
])
def test_bad_objectives_name_the_field(objective, field):
    with pytest.raises(RuleError) as info:
        check_objective(objective, 2)
    assert info.value.field == field


def test_a_calibrated_fit_keeps_its_out_of_fold_decisions():
    X, y = make_classification(200, n_features=5, random_state=2)
    est = MSVMAv(calibration="sigmoid", max_iter=50).fit(X, y)
    assert est.oof_decision_.shape == (200,)
    np.testing.assert_array_equal(est.oof_index_, y)
    # the calibrator is fitted on them: refitting on the kept values gives the same map
    from solver.calibration import fit_calibrator

    again = fit_calibrator(est.oof_decision_, y, est.classes_, "sigmoid")
    assert again.params[0]["a"] == pytest.approx(est.calibrator_.params[0]["a"])
    assert MSVMAv(max_iter=50).fit(X, y).oof_decision_ is None
