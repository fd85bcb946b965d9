"""The hold-out check's warnings point the right way (issue 44): the majority-class baseline is
compared on balanced accuracy and ROC AUC as well as accuracy, each named with both numbers,
and a class the model almost never finds (recall below MIN_RECALL) is named on every model,
whatever its accuracy."""

from __future__ import annotations

import numpy as np

from app.core.jsonable import jsonable
from app.serving.evaluating import MIN_RECALL, holdout_warnings
from solver.evaluation import evaluate
from tests.app.support import to_csv, trained_model


def _evaluation(y_true, y_pred, decision, classes=("no", "yes")):
    return jsonable(evaluate(np.asarray(y_true), np.asarray(y_pred), np.asarray(decision, float),
                             None, np.asarray(classes)))


def _defects(n_defects: int, found: int, false_alarms: int, n: int = 1000):
    """n rows, ``n_defects`` of them "yes"; the model says "yes" on ``found`` of them and on
    ``false_alarms`` of the others; its decision ranks the defects first."""
    y = np.array(["yes"] * n_defects + ["no"] * (n - n_defects))
    pred = np.array(["yes"] * found + ["no"] * (n_defects - found) + ["yes"] * false_alarms
                    + ["no"] * (n - n_defects - false_alarms))
    decision = np.where(y == "yes", 1.0, 0.0) + np.linspace(0, 0.5, n)
    return y, pred, decision


def test_a_model_that_beats_the_accuracy_baseline_yet_almost_never_finds_a_class_is_named():
    """The defect set's case: 190 defects, 11 found (5.8 %), accuracy 0.821 > 0.810."""
    ev = _evaluation(*_defects(190, 11, 0))
    assert ev["accuracy"] > ev["majority_baseline"]
    warnings = holdout_warnings(ev)
    assert any("'yes'" in w and "recall 0.0579" in w and "11 of 190 rows" in w
               and f"below {MIN_RECALL}" in w for w in warnings), warnings


def test_a_model_below_the_accuracy_baseline_says_it_beats_it_on_balanced_accuracy_and_auc():
    """Below the majority's accuracy, yet finding most defects: the warning names accuracy as
    the metric it loses on and balanced accuracy and ROC AUC as those it wins on."""
    ev = _evaluation(*_defects(190, 150, 200))
    assert ev["accuracy"] < ev["majority_baseline"] and ev["balanced_accuracy"] > 0.5
    (warning,) = holdout_warnings(ev)
    lose, win = warning.split("; it does beat it on ")
    assert "accuracy 0.7600 against 0.8100" in lose and "balanced" not in lose
    assert "balanced accuracy 0.7713 against 0.5000" in win and "ROC AUC" in win


def test_the_baselines_are_the_majority_accuracy_one_over_k_and_one_half():
    """Always predicting the majority with a constant score: no better than the baseline on any
    of the three metrics, each named with its baseline (balanced accuracy: 1/3 for three
    classes present; ROC AUC: 1/2), and the two classes it never finds."""
    y = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 20)
    ev = _evaluation(y, np.full(100, "a"), np.zeros((100, 3)), classes=("a", "b", "c"))
    warnings = holdout_warnings(ev)
    assert warnings[0] == (
        "the model does not beat the majority-class baseline (always predicting 'a') on its "
        "hold-out part: accuracy 0.5000 against 0.5000, balanced accuracy 0.3333 against "
        "0.3333, ROC AUC 0.5000 against 0.5000"
    )
    assert [w.split(":")[0] for w in warnings[1:]] == [
        "the model almost never finds class 'b'", "the model almost never finds class 'c'"]
    assert "0 of 30 rows" in warnings[1] and "0 of 20 rows" in warnings[2]


def test_a_good_model_has_no_warning():
    assert holdout_warnings(_evaluation(*_defects(190, 180, 10))) == []


def test_the_trained_model_and_its_job_name_the_class_it_almost_never_finds(client, worker):
    """A third class drawn like the first: the model labels it as the first, with a hold-out
    accuracy far above the majority's; the warning names it in the detail and the job."""
    rng = np.random.default_rng(0)
    centres = {"A": (0.0, 0.0, 0.0), "B": (6.0, 0.0, 0.0), "C": (0.0, 0.0, 0.0)}
    counts = {"A": 300, "B": 200, "C": 25}
    X = np.vstack([rng.normal(centres[c], 1.0, size=(k, 3)) for c, k in counts.items()])
    y = np.concatenate([[c] * k for c, k in counts.items()])
    model = trained_model(client, worker, to_csv(X, y), test_fraction=0.4)
    ev = model["evaluation"]
    assert ev["accuracy"] > ev["majority_baseline"]
    recall_c = next(c["recall"] for c in ev["per_class"] if c["label"] == "C")
    assert recall_c < MIN_RECALL
    assert any("class 'C'" in w and "recall" in w for w in model["warnings"]), model["warnings"]
    job = client.get(f"/jobs/{model['job_id']}").json()
    assert "almost never finds class 'C'" in job["message"]


def test_a_model_without_a_hold_out_is_checked_on_its_out_of_fold_labels(client, worker):
    """Without a hold-out (test_fraction null) the same checks run on the cross-validated
    evaluation, and say so: the class the model almost never finds is named (it was not:
    only a model with a hold-out was checked)."""
    rng = np.random.default_rng(0)
    centres = {"A": (0.0, 0.0, 0.0), "B": (6.0, 0.0, 0.0), "C": (0.0, 0.0, 0.0)}
    counts = {"A": 300, "B": 200, "C": 25}
    X = np.vstack([rng.normal(centres[c], 1.0, size=(k, 3)) for c, k in counts.items()])
    y = np.concatenate([[c] * k for c, k in counts.items()])
    model = trained_model(client, worker, to_csv(X, y), test_fraction=None, search="none")
    ev = model["evaluation"]
    assert ev["source"] == "cross-validated" and model["holdout"] is None
    recall_c = next(c["recall"] for c in ev["per_class"] if c["label"] == "C")
    assert recall_c < MIN_RECALL
    named = [w for w in model["warnings"] if "almost never finds class 'C'" in w]
    assert named and "out of fold (no hold-out)" in named[0], model["warnings"]


def test_no_evaluation_no_warning():
    assert holdout_warnings(None) == [] and holdout_warnings({}) == []
