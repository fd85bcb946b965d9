"""Imputation of missing values: ``missing`` = "mean" | "median" | "most_frequent" | "constant".

At upload a dataset with such a ``missing`` keeps its missing cells: the column specs carry
``"impute": {"strategy": ...}`` (and ``"fill_value"`` for constant) without a fill, and the
encoder writes NaN for a missing cell (a numeric column's value; the first cell of a categorical
column's one-hot block, the others 0). Training fits the fills on its training part only
(``fit_fills``, scikit-learn's ``SimpleImputer`` semantics: numeric columns the mean, median,
most frequent value or the constant, ``fill_value`` default 0; categorical columns the most
frequent category, ties to the smallest, for mean/median/most_frequent, or the constant, default
"missing_value", which encodes as an all-zero block when it is not a category) and stores them
in the model's encoding as ``"impute": {"strategy": ..., "fill": <number or category>}``; the
encoder then codes a missing cell as its column's fill (``ColumnCoder``) at every door, and
``apply_fills`` fills an encoded matrix's NaN cells.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .column_specs import spec_width
from .errors import IngestError
from .text import parse_number

STRATEGIES = ("mean", "median", "most_frequent", "constant")
MISSING_OPTIONS = ("error", "drop", *STRATEGIES)
DEFAULT_NUMERIC_FILL = 0.0
DEFAULT_CATEGORICAL_FILL = "missing_value"  # SimpleImputer's for strings

Matrix = np.ndarray | sp.csr_matrix


def check_missing(missing: str, fill_value: str | None) -> None:
    """422 for a ``missing`` that is not an option, or a ``fill_value`` without constant."""
    if missing not in MISSING_OPTIONS:
        raise IngestError(f"missing must be one of {', '.join(map(repr, MISSING_OPTIONS))}, "
                          f"not {missing!r}.", field="missing")
    if fill_value is not None and missing != "constant":
        raise IngestError("fill_value is only used with missing='constant'.", field="fill_value")


def impute_spec(spec: dict, missing: str, fill_value: str | None) -> dict:
    """A feature column's spec at upload, marked for imputation (no fill yet)."""
    impute: dict = {"strategy": missing}
    if missing == "constant":
        if spec["kind"] == "categorical":
            impute["fill_value"] = (fill_value if fill_value is not None
                                    else DEFAULT_CATEGORICAL_FILL)
        else:
            number = DEFAULT_NUMERIC_FILL if fill_value is None else parse_number(fill_value)
            if number is None or not np.isfinite(number):
                raise IngestError(f"fill_value {fill_value!r} is not a number, and column "
                                  f"{spec['name']!r} is numeric.", field="fill_value",
                                  column=spec["name"])
            impute["fill_value"] = float(number)
    return {**spec, "impute": impute}


def needs_fit(encoding: dict) -> bool:
    """Do the encoding's columns wait for their fills (a dataset's encoding)?"""
    return any("impute" in c and "fill" not in c["impute"] for c in encoding.get("columns", ()))


def _bases(specs: list[dict]) -> list[int]:
    return np.cumsum([0] + [spec_width(s) for s in specs]).tolist()


def _numeric_fill(col: Matrix, strategy: str) -> float:
    from sklearn.impute import SimpleImputer

    imputer = SimpleImputer(strategy=strategy, keep_empty_features=True).fit(col)
    return float(imputer.statistics_[0])


def _most_frequent(block: Matrix, categories: list[str]) -> str:
    """The most frequent category among the block's rows without NaN (ties: the smallest)."""
    block = block.toarray() if sp.issparse(block) else block
    present = ~np.isnan(block).any(axis=1)
    counts = block[present].sum(axis=0)
    if not counts.size or counts.max() == 0:
        return min(categories) if categories else DEFAULT_CATEGORICAL_FILL
    return min(c for c, n in zip(categories, counts, strict=True) if n == counts.max())


def fit_fills(X: Matrix, encoding: dict) -> dict:
    """The encoding with each imputed column's fill fitted on the rows of ``X`` (the training
    part, encoded, missing cells NaN)."""
    specs = encoding["columns"]
    bases = _bases(specs)
    columns = []
    for spec, base in zip(specs, bases, strict=False):
        impute = spec.get("impute")
        if impute is None:
            columns.append(spec)
            continue
        strategy = impute["strategy"]
        if strategy == "constant":
            fill = impute["fill_value"]
        elif spec["kind"] == "categorical":
            fill = _most_frequent(X[:, base:base + spec_width(spec)], spec["categories"])
        else:
            fill = _numeric_fill(X[:, [base]], strategy)
        columns.append({**spec, "impute": {**impute, "fill": fill}})
    return {**encoding, "columns": columns}


def _targets(specs: list[dict], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per encoded column holding a missing cell's NaN: the column and value its fill sets."""
    target = np.arange(width)
    value = np.full(width, np.nan)
    for spec, base in zip(specs, _bases(specs), strict=False):
        impute = spec.get("impute")
        if impute is None or "fill" not in impute:
            continue
        fill = impute["fill"]
        if spec["kind"] == "categorical":
            cats = spec["categories"]
            if fill in cats:
                target[base], value[base] = base + cats.index(fill), 1.0
            else:
                value[base] = 0.0
        else:
            value[base] = float(fill)
    return target, value


def apply_fills(X: Matrix, encoding: dict) -> Matrix:
    """``X`` (encoded as the encoding says, missing cells NaN) with every NaN replaced by its
    column's fill: a dense X in place, a CSR X as a new matrix."""
    specs = encoding["columns"]
    target, value = _targets(specs, _bases(specs)[-1])
    if sp.issparse(X):
        X = X.tocsr(copy=True)
        at = np.flatnonzero(np.isnan(X.data))
        cols = X.indices[at]
        X.indices[at] = target[cols]
        X.data[at] = value[cols]
        X.has_sorted_indices = False
        X.sort_indices()
        X.eliminate_zeros()
        return X
    rows, cols = np.nonzero(np.isnan(X[:, : len(target)]))
    X[rows, cols] = 0.0
    X[rows, target[cols]] = value[cols]
    return X


def imputation_summary(encoding: dict) -> list[dict]:
    """Per categorical or imputed feature column: its kind, handle_unknown (categorical) and
    imputation (the model detail; plain numeric columns, e.g. an svmlight file's 10^5, are left
    out)."""
    out = []
    for spec in encoding.get("columns") or ():
        if spec["kind"] != "categorical" and "impute" not in spec:
            continue
        item: dict = {"name": spec["name"], "kind": spec["kind"]}
        if spec["kind"] == "categorical":
            item["handle_unknown"] = spec.get("handle_unknown", "error")
        impute = spec.get("impute")
        if impute is not None:
            item["impute"] = {"strategy": impute["strategy"], "fill": impute.get("fill")}
        out.append(item)
    return out
