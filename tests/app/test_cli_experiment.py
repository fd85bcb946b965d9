"""``msvmav experiment``: the paper's protocol on one data file from the command line."""

from __future__ import annotations

import json

from sklearn.datasets import make_classification

from app.cli.experiment import main


def test_cli_main(tmp_path, capsys):
    X, y = make_classification(n_samples=80, n_features=3, n_informative=2, n_redundant=0,
                               random_state=1)
    path = tmp_path / "toy.csv"
    lines = ["a,b,c,junk,Class"] + [f"{r[0]:.5f},{r[1]:.5f},{r[2]:.5f},{i},{'pos' if t else 'neg'}"
                                    for i, (r, t) in enumerate(zip(X, y, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    out, plot = tmp_path / "res.json", tmp_path / "m.png"
    code = main(["--dataset", str(path), "--label", "Class", "--drop", "junk",
                 "--algorithms", "msvmav", "mamc", "--splits", "2", "--cv", "2",
                 "--grid", "quick", "--n-jobs", "1", "--out", str(out), "--format", "csv",
                 "--plot", str(plot), "--quiet"])
    assert code == 0
    data = json.loads(out.read_text())["datasets"]["toy"]
    assert data["protocol"]["n_features"] == 3 and data["protocol"]["splits"] == 2
    assert len(data["algorithms"]["msvmav"]["accuracies"]) == 2
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "dataset,MSVMAv_mean,MSVMAv_std,MAMC_mean,MAMC_std,MAMC_vs_MSVMAv"
    assert printed[1].startswith("toy,")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
