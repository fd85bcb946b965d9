"""A model's feature columns among its dataset's stored ones: all of them, or all but the
numeric column /train's ``weight_column`` named (its values weighed the rows; it is no
feature of the model).

``without_column`` takes the column out of a dataset's matrix and encoding for the fit (the
model's encoding lists it as dropped, so a prediction row or file that has it is read as one
that has any dropped column); ``dataset_features`` gives a stored dataset's rows as a model's
features (the dataset's own matrix when the model kept every column), for every place that
scores a model on its dataset (evaluate, threshold, leaderboard, margins, monitoring, batch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from app.ingest.column_specs import spec_width

Matrix = np.ndarray | sp.csr_matrix


def column_position(encoding: dict[str, Any], name: str) -> int | None:
    """The matrix column of the encoding's numeric column ``name``; None when the encoding
    has no numeric column of that name."""
    position = 0
    for spec in encoding.get("columns") or ():
        if spec.get("name") == name:
            return position if spec.get("kind") == "numeric" else None
        position += spec_width(spec)
    return None


def drop_column(X: Matrix, position: int) -> Matrix:
    """X without its column ``position`` (a copy; CSR stays CSR)."""
    if sp.issparse(X):
        keep = np.delete(np.arange(X.shape[1]), position)
        return sp.csr_matrix(X[:, keep])
    return np.delete(np.asarray(X), position, axis=1)


def without_column(
    X: Matrix, encoding: dict[str, Any], name: str
) -> tuple[Matrix, np.ndarray, dict[str, Any]]:
    """(X without the numeric column ``name``, that column's values (n,), the encoding
    without it: listed as dropped, every input column still named)."""
    position = column_position(encoding, name)
    if position is None:
        raise ValueError(f"the dataset has no numeric column {name!r}")
    column = X[:, position]
    values = np.asarray(column.todense() if sp.issparse(column) else column,
                        dtype=np.float64).reshape(-1)
    columns = [c for c in encoding["columns"] if c.get("name") != name]
    names = [c["name"] for c in encoding["columns"]]
    label = encoding.get("label")
    reduced = {
        **encoding,
        "columns": columns,
        "input_columns": encoding.get("input_columns") or [*names, *([label] if label else [])],
        "dropped": [*(encoding.get("dropped") or []), name],
        "n_output_features": int(encoding.get("n_output_features") or len(names)) - 1,
    }
    return drop_column(X, position), values, reduced


def weight_column(params: dict[str, Any] | None) -> str | None:
    """The column a model's rows were weighed by (its params' ``weight_column``), if any."""
    name = (params or {}).get("weight_column")
    return name if isinstance(name, str) else None


def feature_match(dataset: Any, model: Any) -> bool:
    """Are the model's features its dataset's columns: all of them, or all but the model's
    weight column (``dataset``, ``model``: rows with ``feature_names``)?"""
    names = list(dataset.feature_names)
    if names == list(model.feature_names):
        return True
    name = weight_column(model.params)
    return name is not None and [n for n in names if n != name] == list(model.feature_names)


def dataset_features(X: Matrix, dataset: Any, model: Any) -> Matrix:
    """The dataset's stored rows X as the model's features: X itself, or X without the
    model's weight column (``feature_match`` must hold)."""
    name = weight_column(model.params)
    if name is None or list(dataset.feature_names) == list(model.feature_names):
        return X
    position = column_position(dataset.encoding, name)
    assert position is not None, "feature_match holds"
    return drop_column(X, position)


__all__ = ["column_position", "dataset_features", "drop_column", "feature_match",
           "weight_column", "without_column"]
