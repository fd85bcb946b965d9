"""The paper's Table-1 layout of experiment results, as Markdown and as CSV (the paper's
``table1_linear.csv``). A data set's name is user input: its cell goes through the service's
escaping (``table_cells``: no live formula in a spreadsheet, no HTML or link in rendered
Markdown)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from app.experiments.table_cells import csv_cell, markdown_cell
from solver import ExperimentResult, display_name, table_columns, win_tie_loss

MARKS = {"win": "●", "loss": "○", "tie": ""}
CSV_OUTCOMES = {"win": "MSVMAv_significantly_better", "loss": "MSVMAv_significantly_worse",
                "tie": "tie"}


def _as_result(r: ExperimentResult | dict) -> ExperimentResult:
    return r if isinstance(r, ExperimentResult) else ExperimentResult.from_dict(r)


def _cell(r: ExperimentResult, a: str) -> str:
    rec = r.algorithms.get(a)
    if rec is None:
        return "–"
    mark = MARKS[r.comparisons[a]["outcome"]] if a in r.comparisons else ""
    return f"{rec['mean']:.4f}±{_std(rec) or '–'}" + (f" {mark}" if mark else "")


def _std(rec: dict) -> str:
    """The std as printed; "" when undefined (a single partition: ddof=1 needs two)."""
    return f"{rec['std']:.4f}" if len(rec.get("accuracies", ())) != 1 else ""


def to_markdown(results_by_dataset: dict[str, ExperimentResult | dict],
                algorithms: Sequence[str] | None = None) -> str:
    """Table 1 layout: rows = data sets, columns = algorithms, cells "mean±std mark"; a last
    row with MSVMAv's win/tie/loss counts against each algorithm."""
    res = {k: _as_result(v) for k, v in results_by_dataset.items()}
    cols = table_columns(res, algorithms)
    lines = ["| dataset | " + " | ".join(display_name(a) for a in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for name, r in res.items():
        lines.append(f"| {markdown_cell(name)} | " + " | ".join(_cell(r, a) for a in cols) + " |")
    wtl = win_tie_loss(res, cols)
    lines.append("| win/tie/loss | " + " | ".join(
        "/".join(map(str, wtl[a])) if a in wtl else "–" for a in cols) + " |")
    lines.append("")
    lines.append("● MSVMAv significantly better, ○ significantly worse (paired two-sided "
                 "t-test over the partitions, 95 %); std with ddof=1.")
    return "\n".join(lines) + "\n"


def to_csv(results_by_dataset: dict[str, ExperimentResult | dict],
           algorithms: Sequence[str] | None = None) -> str:
    """The layout of the paper's table1_linear.csv: dataset, MSVMAv_mean, MSVMAv_std,
    SVM_mean, SVM_std, SVM_vs_MSVMAv, ... and a last "win/tie/loss" row (counts "w/t/l" in the
    *_vs_MSVMAv columns)."""
    res = {k: _as_result(v) for k, v in results_by_dataset.items()}
    cols = table_columns(res, algorithms)
    header = ["dataset"]
    for a in cols:
        name = display_name(a)
        header += [f"{name}_mean", f"{name}_std"] + ([] if a == "msvmav" else
                                                     [f"{name}_vs_MSVMAv"])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for name, r in res.items():
        row = [name]
        for a in cols:
            rec = r.algorithms.get(a)
            row += ([f"{rec['mean']:.4f}", _std(rec)] if rec else ["", ""])
            if a != "msvmav":
                row.append(CSV_OUTCOMES[r.comparisons[a]["outcome"]]
                           if a in r.comparisons else "")
        w.writerow([csv_cell(cell) for cell in row])
    wtl = win_tie_loss(res, cols)
    row = ["win/tie/loss"]
    for a in cols:
        row += ["", ""] + ([] if a == "msvmav" else ["/".join(map(str, wtl[a]))])
    w.writerow(row)
    return buf.getvalue()
