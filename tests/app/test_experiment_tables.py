"""The Table-1 layout of experiment results (app.experiments.tables): the Markdown and CSV
layouts, and "–" for the std of a single partition (ddof=1 is undefined there)."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from app.experiments.tables import to_csv, to_markdown
from solver.experiments import ExperimentResult, compare, run_experiment, summarize, win_tie_loss


def _data(n: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = rng.normal(size=(n, 3)) + 2.5 * y[:, None]
    return X, y


def _run(splits: int):
    X, y = _data()
    return run_experiment(X, y, algorithms=["msvmav", "svm"], splits=splits, cv=2,
                          grid="quick", n_jobs=1, dataset="blobs", keep_margins=False)


def test_one_split_prints_a_dash_for_the_undefined_std():
    r = _run(1)
    md = to_markdown({"blobs": r})
    row = next(line for line in md.splitlines() if line.startswith("| blobs |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    for a, cell in zip(["msvmav", "svm"], cells, strict=True):
        (acc,) = r.algorithms[a]["accuracies"]
        assert cell.split()[0] == f"{acc:.4f}±–", row
    assert "±0.0000" not in md
    rows = list(csv.DictReader(io.StringIO(to_csv({"blobs": r}))))
    assert rows[0]["MSVMAv_std"] == "" and rows[0]["SVM_std"] == ""
    assert rows[0]["MSVMAv_mean"] == f"{r.algorithms['msvmav']['accuracies'][0]:.4f}"


def test_several_splits_print_the_sample_std():
    r = _run(3)
    md = to_markdown({"blobs": r})
    accs = np.asarray(r.algorithms["msvmav"]["accuracies"])
    expected = f"{accs.mean():.4f}±{accs.std(ddof=1):.4f}"
    assert f"| blobs | {expected}" in md, md
    rows = list(csv.DictReader(io.StringIO(to_csv({"blobs": r}))))
    assert rows[0]["MSVMAv_std"] == f"{accs.std(ddof=1):.4f}"


def _result(name, accs, **extra):
    algos = {a: {"accuracies": v, "params": [{}] * len(v), "cv_scores": v, "seconds": 0.0}
             for a, v in accs.items()}
    for rec in algos.values():
        rec["mean"], rec["std"] = summarize(rec["accuracies"])
    comps = {a: compare(accs["msvmav"], v) for a, v in accs.items() if a != "msvmav"}
    return ExperimentResult(dataset=name, protocol={}, algorithms=algos, comparisons=comps,
                            **extra)


@pytest.fixture
def two_results():
    win = _result("d1", {"msvmav": [0.90, 0.91, 0.92, 0.90], "svm": [0.85, 0.86, 0.86, 0.85],
                         "mamc": [0.95, 0.96, 0.97, 0.96]})
    tie = _result("d2", {"msvmav": [0.80, 0.70, 0.90, 0.75], "svm": [0.78, 0.74, 0.86, 0.79],
                         "mamc": [0.60, 0.61, 0.62, 0.60]})
    return {"d1": win, "d2": tie.to_dict()}


def test_markdown_layout(two_results):
    md = to_markdown(two_results)
    lines = md.splitlines()
    assert lines[0] == "| dataset | MSVMAv | SVM | MAMC |"
    assert lines[1] == "|---|---|---|---|"
    assert lines[2].startswith("| d1 | 0.9075±0.0096 | 0.8550±0.0058 ● | 0.9600±")
    assert lines[2].endswith(" ○ |")
    assert lines[3].startswith("| d2 | 0.7875±0.0854 | 0.7925±")  # a tie: no mark
    assert "●" not in lines[3].split("|")[3]
    assert lines[4] == "| win/tie/loss | – | 1/1/0 | 1/0/1 |"
    assert win_tie_loss(two_results) == {"svm": (1, 1, 0), "mamc": (1, 0, 1)}


def test_csv_layout(two_results):
    rows = list(csv.reader(io.StringIO(to_csv(two_results))))
    assert rows[0] == ["dataset", "MSVMAv_mean", "MSVMAv_std", "SVM_mean", "SVM_std",
                       "SVM_vs_MSVMAv", "MAMC_mean", "MAMC_std", "MAMC_vs_MSVMAv"]
    assert rows[1][:6] == ["d1", "0.9075", "0.0096", "0.8550", "0.0058",
                           "MSVMAv_significantly_better"]
    assert rows[1][8] == "MSVMAv_significantly_worse"
    assert rows[2][5] == "tie"
    assert rows[3] == ["win/tie/loss", "", "", "", "", "1/1/0", "", "", "1/0/1"]
