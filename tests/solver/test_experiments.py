"""The protocol: statistics, t-test outcomes and renderers (the command line:
tests/app/test_cli_experiment.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import sparse, stats
from sklearn.datasets import make_classification

from solver.experiments import (
    ExperimentResult,
    compare,
    run_experiment,
    summarize,
)
from solver.scaling import MinMaxScaling


def test_compare_significant_win_matches_scipy():
    a = [0.90, 0.91, 0.92, 0.90, 0.93, 0.91]
    b = [0.85, 0.87, 0.86, 0.86, 0.88, 0.85]
    ref = stats.ttest_rel(a, b)
    out = compare(a, b)
    assert ref.pvalue < 0.05
    assert out["outcome"] == "win"
    assert out["p_value"] == pytest.approx(ref.pvalue)
    assert out["statistic"] == pytest.approx(ref.statistic)
    assert compare(b, a)["outcome"] == "loss"


def test_compare_tie_matches_scipy():
    a = [0.90, 0.85, 0.92, 0.88, 0.91]
    b = [0.89, 0.88, 0.90, 0.90, 0.89]
    ref = stats.ttest_rel(a, b)
    assert ref.pvalue >= 0.05
    out = compare(a, b)
    assert out["outcome"] == "tie" and out["p_value"] == pytest.approx(ref.pvalue)
    # identical vectors and a single partition are ties without a p-value
    assert compare(a, a)["outcome"] == "tie"
    assert compare([0.9], [0.8]) == {"outcome": "tie", "p_value": None, "statistic": None}


def test_summarize_uses_ddof_1():
    mean, std = summarize([0.8, 0.9, 1.0])
    assert mean == pytest.approx(0.9) and std == pytest.approx(0.1)
    assert summarize([0.7]) == (0.7, 0.0)


def test_minmax_train_fit_and_clip():
    Xtr = np.array([[0.0, 5.0, 1.0], [2.0, 5.0, 3.0]])
    scaling = MinMaxScaling.fit(Xtr)
    out = scaling.transform(np.array([[1.0, 5.0, 4.0], [-1.0, 7.0, 2.0]]))
    # a constant training feature has scale 1 (as MinMaxScaler): 7 - 5 = 2, clipped to 1
    np.testing.assert_allclose(out, [[0.5, 0.0, 1.0], [0.0, 1.0, 0.5]])
    unclipped = scaling.transform(np.array([[4.0, 5.0, 0.0]]), clip=False)
    np.testing.assert_allclose(unclipped, [[2.0, 0.0, -0.5]])
    S = sparse.csr_matrix([[0.0, 2.0], [4.0, 0.0]])
    res = MinMaxScaling.fit(S).transform(sparse.csr_matrix([[8.0, 1.0]]))
    assert sparse.issparse(res)
    np.testing.assert_allclose(res.toarray(), [[1.0, 0.5]])


def test_run_experiment_small():
    X, y = make_classification(n_samples=90, n_features=4, random_state=0)
    X = X * 10 + 3
    seen = []
    res = run_experiment(X, y, algorithms=["msvmav", "svm", "mamc"], splits=3,
                         grid={"msvmav": {"alpha": [16.0], "beta": [0.25, 1.0]},
                               "svm": {"C": [1.0]}, "mamc": {}},
                         cv=3, n_jobs=1, callback=lambda d, t: seen.append((d, t)),
                         dataset="toy")
    # 3 splits x (2 x 3 + 1 + 1 x 3 + 1 + 1 x 3 + 1) cells
    assert seen[-1] == (3 * 15, 3 * 15)
    rec = res.algorithms["msvmav"]
    assert len(rec["accuracies"]) == 3 and len(rec["params"]) == 3
    assert rec["std"] == pytest.approx(np.std(rec["accuracies"], ddof=1))
    assert set(res.comparisons) == {"svm", "mamc"}
    assert res.comparisons["svm"] == compare(rec["accuracies"],
                                             res.algorithms["svm"]["accuracies"])
    assert set(res.margins) == {"msvmav", "svm", "mamc"}
    assert res.margins["msvmav"]["n"] == 18
    d = json.loads(json.dumps(res.to_dict()))
    assert ExperimentResult.from_dict(d).algorithms["svm"]["mean"] == res.algorithms["svm"][
        "mean"]
