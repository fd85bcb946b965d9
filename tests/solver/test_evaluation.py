"""solver.evaluation against independent computations: sklearn.metrics called directly on the
same predictions, and the ECE / confusion matrix / majority baseline / reliability counts
computed here by hand with plain loops."""

import json

import numpy as np
import pytest
from sklearn import metrics
from sklearn.datasets import make_classification
from sklearn.preprocessing import MinMaxScaler, label_binarize

from solver import MSVMAv
from solver.evaluation import curves, evaluate, expected_calibration_error


def fitted(classes=2, n=300, seed=0, labels=None):
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=classes, n_clusters_per_class=1, flip_y=0.15,
                               weights=None if classes > 2 else [0.7, 0.3], random_state=seed)
    X = MinMaxScaler().fit_transform(X)
    if labels is not None:
        y = np.asarray(labels)[y]
    est = MSVMAv(calibration="sigmoid").fit(X[:200], y[:200])
    Xt, yt = X[200:], y[200:]
    D = est.decision_function(Xt)
    return est, yt, est.predict(Xt), D, est.predict_proba(Xt)


def ece_by_hand(y_idx, P, n_bins=10):
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        rows = [i for i in range(len(P)) if (lo < P[i].max() <= hi) or (b == 0 and
                                                                         P[i].max() <= hi)]
        if rows:
            acc = np.mean([np.argmax(P[i]) == y_idx[i] for i in rows])
            conf = np.mean([P[i].max() for i in rows])
            total += len(rows) / len(P) * abs(acc - conf)
    return total


def test_binary_metrics_equal_sklearn_and_hand_computations():
    est, y, pred, D, P = fitted(labels=["neg", "pos"])
    r = evaluate(y, pred, D, P, est.classes_)
    json.dumps(r)  # JSON-able as it is
    assert r["n"] == 100
    assert r["accuracy"] == np.mean(pred == y)
    assert r["balanced_accuracy"] == pytest.approx(
        np.mean([np.mean(pred[y == c] == c) for c in ("neg", "pos")]))
    majority = "neg" if np.sum(y == "neg") >= np.sum(y == "pos") else "pos"
    assert r["majority_class"] == majority
    assert r["majority_baseline"] == np.mean(y == majority)
    assert r["beats_baseline"] == (r["accuracy"] > r["majority_baseline"])
    positive = y == "pos"
    assert r["roc_auc"] == pytest.approx(metrics.roc_auc_score(positive, D))
    # ROC AUC by hand: the share of (positive, negative) pairs ranked right (ties half)
    pairs = D[positive][:, None] - D[~positive][None, :]
    assert r["roc_auc"] == pytest.approx(np.mean((pairs > 0) + 0.5 * (pairs == 0)))
    assert r["pr_auc"] == pytest.approx(metrics.average_precision_score(positive, D))
    p1 = np.clip(P[:, 1], 1e-15, 1 - 1e-15)
    assert r["log_loss"] == pytest.approx(-np.mean(np.where(positive, np.log(p1),
                                                            np.log(1 - p1))))
    assert r["brier"] == pytest.approx(np.mean((P[:, 1] - positive) ** 2))
    assert r["ece"] == pytest.approx(ece_by_hand(positive.astype(int), P))
    matrix = [[int(np.sum((y == a) & (pred == b))) for b in ("neg", "pos")]
              for a in ("neg", "pos")]
    assert r["confusion_matrix"] == {"labels": ["neg", "pos"], "matrix": matrix}
    for row in r["per_class"]:
        c = row["label"]
        tp = np.sum((pred == c) & (y == c))
        assert row["precision"] == pytest.approx(tp / max(1, np.sum(pred == c)))
        assert row["recall"] == pytest.approx(tp / np.sum(y == c))
        assert row["support"] == np.sum(y == c)
        p, rc = row["precision"], row["recall"]
        assert row["f1"] == pytest.approx(0 if p + rc == 0 else 2 * p * rc / (p + rc))


def test_multiclass_metrics_macro_and_per_class():
    est, y, pred, D, P = fitted(classes=3)
    r = evaluate(y, pred, D, P, est.classes_)
    json.dumps(r)
    per = [metrics.roc_auc_score(y == c, D[:, j]) for j, c in enumerate(est.classes_)]
    assert r["roc_auc"]["per_class"] == {str(c): pytest.approx(v)
                                         for c, v in zip(est.classes_, per, strict=True)}
    assert r["roc_auc"]["macro"] == pytest.approx(
        metrics.roc_auc_score(label_binarize(y, classes=est.classes_), D, average="macro"))
    assert r["pr_auc"]["macro"] == pytest.approx(
        metrics.average_precision_score(label_binarize(y, classes=est.classes_), D,
                                        average="macro"))
    onehot = label_binarize(y, classes=est.classes_)
    assert r["log_loss"] == pytest.approx(-np.mean(np.log(np.sum(onehot * P, axis=1))))
    assert r["brier"] == pytest.approx(np.mean(np.sum((P - onehot) ** 2, axis=1)))
    assert r["ece"] == pytest.approx(ece_by_hand(np.searchsorted(est.classes_, y), P))
    assert len(r["per_class"]) == 3


def test_without_probabilities_the_probability_metrics_are_none():
    est, y, pred, D, _ = fitted()
    r = evaluate(y, pred, D, None, est.classes_)
    assert r["log_loss"] is None and r["brier"] is None and r["ece"] is None
    assert r["roc_auc"] is not None
    assert curves(y, D, None, est.classes_)["reliability"] == []


def test_a_model_at_the_majority_baseline_does_not_beat_it():
    y = np.array([0] * 8 + [1] * 2)
    pred = np.zeros(10, dtype=int)
    r = evaluate(y, pred, np.linspace(-1, -0.1, 10), None, np.array([0, 1]))
    assert r["majority_baseline"] == 0.8 and r["accuracy"] == 0.8
    assert r["beats_baseline"] is False


def test_unknown_labels_count_as_errors_and_leave_the_ranking_metrics():
    est, y, pred, D, P = fitted()
    y = y.copy()
    y[:5] = 7  # a label the model never saw
    r = evaluate(y, pred, D, P, est.classes_)
    assert r["accuracy"] == np.mean(pred == y)
    assert r["confusion_matrix"]["labels"] == [0, 1, 7]
    assert r["roc_auc"] == pytest.approx(metrics.roc_auc_score(y[5:] == 1, D[5:]))


def test_curves_equal_sklearns_and_reliability_counts_add_up():
    est, y, pred, D, P = fitted(classes=3)
    c = curves(y, D, P, est.classes_)
    json.dumps(c)
    assert [e["label"] for e in c["roc"]] == est.classes_.tolist()
    for j, entry in enumerate(c["roc"]):
        fpr, tpr, thr = metrics.roc_curve(y == est.classes_[j], D[:, j])
        np.testing.assert_allclose(entry["fpr"], fpr)
        np.testing.assert_allclose(entry["tpr"], tpr)
        assert entry["thresholds"][0] is None  # +inf in scikit-learn
        np.testing.assert_allclose(entry["thresholds"][1:], thr[1:])
    for j, entry in enumerate(c["reliability"]):
        p = P[:, j]
        assert sum(entry["count"]) == len(y)
        # by hand: mean predicted probability of each non-empty bin
        edges = np.linspace(0, 1, 11)
        means = [p[(p > lo) & (p <= hi) | ((lo == 0) & (p <= hi) & (p >= 0))].mean()
                 for lo, hi in zip(edges[:-1], edges[1:], strict=True)
                 if np.any((p > lo) & (p <= hi) | ((lo == 0) & (p >= 0) & (p <= hi)))]
        np.testing.assert_allclose(entry["mean_predicted"], means)
    est, y, _, D, P = fitted()
    binary = curves(y, D, P, est.classes_)
    assert [e["label"] for e in binary["roc"]] == [1]  # two classes: classes_[1] only
    np.testing.assert_allclose(binary["pr"][0]["precision"],
                               metrics.precision_recall_curve(y == 1, D)[0])


def test_ece_of_perfectly_calibrated_bins_is_zero():
    # two bins, each with accuracy equal to its confidence
    P = np.array([[0.25, 0.75]] * 4 + [[0.9, 0.1]] * 10)
    y_idx = np.array([1, 1, 1, 0] + [0] * 9 + [1])
    assert expected_calibration_error(y_idx, P) == pytest.approx(0.0)
