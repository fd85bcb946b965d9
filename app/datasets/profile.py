"""A stored dataset's preview (its first rows as stored) and per-column profile, for the web
interface's dataset page (GET /datasets/{id}/profile).

The profile is computed on the stored, encoded matrix: one entry per column of the file that
became features (a categorical column's one-hot block summed back into category counts), plus
the label's class counts. Values are those after the upload's missing-value handling, so
``missing`` counts the NaN still stored (``missing=keep``/error leave none once imputed or
dropped). At most ``PROFILE_ROWS`` rows and ``PROFILE_COLUMNS`` columns are profiled (the
answer says how many), so its cost is bounded whatever the dataset's size."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from app.datasets.orm import Dataset

PREVIEW_ROWS = 10
PROFILE_ROWS = 100_000
PROFILE_COLUMNS = 200
_TOP_CATEGORIES = 20


def _numeric(name: str, col: np.ndarray) -> dict[str, Any]:
    finite = col[~np.isnan(col)]
    return {
        "name": name,
        "kind": "numeric",
        "missing": int(col.size - finite.size),
        "distinct": int(np.unique(finite).size),
        "min": float(finite.min()) if finite.size else None,
        "max": float(finite.max()) if finite.size else None,
        "mean": float(finite.mean()) if finite.size else None,
    }


def _categorical(spec: dict[str, Any], block: np.ndarray) -> dict[str, Any]:
    counts = np.nansum(block, axis=0).astype(np.int64)
    order = np.argsort(-counts, kind="stable")[:_TOP_CATEGORIES]
    categories = spec.get("categories") or []
    return {
        "name": spec["name"],
        "kind": "categorical",
        # rows whose one-hot block is all zeros: missing or a category unseen at upload
        "missing": int((np.nansum(block, axis=1) == 0).sum()),
        "distinct": int((counts > 0).sum()),
        "min": None,
        "max": None,
        "mean": None,
        "top": [{"value": categories[i], "count": int(counts[i])} for i in order
                if i < len(categories)],
    }


def _columns(X: np.ndarray, encoding: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    specs = encoding.get("columns") or [{"name": n, "kind": "numeric"} for n in names]
    out: list[dict[str, Any]] = []
    start = 0
    for spec in specs:
        width = len(spec.get("categories") or []) if spec.get("kind") == "categorical" else 1
        if start + width > X.shape[1] or len(out) >= PROFILE_COLUMNS:
            break
        block = X[:, start : start + width]
        out.append(_categorical(spec, block) if width != 1 or spec.get("kind") == "categorical"
                   else _numeric(spec["name"], block[:, 0]))
        start += width
    return out


def profile(dataset: Dataset, X: np.ndarray | sp.csr_matrix, y: np.ndarray) -> dict[str, Any]:
    """The preview and the profile of ``dataset`` from its stored arrays ``X``, ``y``."""
    n = min(X.shape[0], PROFILE_ROWS)
    width = min(X.shape[1], PROFILE_COLUMNS * 8)  # enough for PROFILE_COLUMNS one-hot blocks
    head = X[:n, :width]
    dense = head.toarray() if sp.issparse(head) else np.asarray(head, dtype=np.float64)
    preview = dense[:PREVIEW_ROWS, : min(width, PROFILE_COLUMNS)]
    columns = _columns(dense, dataset.encoding or {}, list(dataset.feature_names))
    return {
        "dataset_id": dataset.id,
        "rows_profiled": int(n),
        "n_rows": dataset.n_rows,
        "columns": columns,
        "n_columns": len(dataset.encoding.get("columns") or dataset.feature_names),
        "label": {
            "name": (dataset.encoding or {}).get("label"),
            "classes": list(dataset.classes),
            "counts": list(dataset.class_counts),
        },
        "preview": {
            "feature_names": list(dataset.feature_names[: preview.shape[1]]),
            "rows": [[None if np.isnan(v) else float(v) for v in row] for row in preview],
            "labels": [v.item() if hasattr(v, "item") else v for v in y[:PREVIEW_ROWS]],
        },
    }
