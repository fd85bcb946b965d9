"""Table cells of an experiment: mean±std, and "–" for the std of a single partition (ddof=1
is undefined there), in the Markdown and CSV tables."""

from __future__ import annotations

import csv
import io

import numpy as np

from solver.experiments import run_experiment, to_csv, to_markdown


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
