"""Real data sets of the paper for solver tests (../shared/datasets: CI has them; a test
skips where they are not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.io import arff
from sklearn.preprocessing import MinMaxScaler

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def wdbc_scaled() -> tuple[np.ndarray, np.ndarray]:
    """wdbc.arff's features min-max scaled to [0, 1] and its Class labels (skips without it)."""
    path = DATASETS / "wdbc.arff"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    rows, _ = arff.loadarff(path)
    names = [n for n in rows.dtype.names if n != "Class"]
    X = np.array([[float(r[n]) for n in names] for r in rows])
    y = np.array([r["Class"].decode() for r in rows])
    return MinMaxScaler().fit_transform(X), y
