"""What runs on the Dask workers for a kernel fit: functions of one prepared row block
``part`` = (X, y) (``_blocks.prepare``, no intercept column) and of the Nystroem map
(``Landmarks``), returning sums over the block's rows (``_blocks.add`` combines them) or the
block's mapped rows, which stay on the worker that computed them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..kernels import kernel_diagonal
from ..low_rank import landmark_features


@dataclass(frozen=True)
class Landmarks:
    """The feature map phi(x) = L_PP^{-1} k(X_P, x): the landmark rows ``rows`` (r, d), their
    lower-triangular block ``block`` (r, r) and the kernel's arguments ``args``."""

    rows: np.ndarray
    block: np.ndarray
    args: dict

    @property
    def rank(self) -> int:
        return int(self.rows.shape[0])

    def features(self, X) -> np.ndarray:
        """phi(X), (len(X), rank)."""
        return np.ascontiguousarray(landmark_features(X, self.rows, self.block, **self.args).T)


def entry_sums(part: tuple) -> dict:
    """The block's number of entries and their sum (for the mean of every entry of X)."""
    X = part[0]
    values = X.data if sparse.issparse(X) else X
    return {"size": int(X.shape[0]) * int(X.shape[1]), "sum": float(values.sum())}


def squared_deviations(part: tuple, mean: float) -> float:
    """sum over every entry of the block of (x - mean)^2 (a CSR block's zeros included), as
    ``solver.kernels.feature_variance`` sums them."""
    X = part[0]
    if sparse.issparse(X):
        dev = X.data - mean
        return float(dev @ dev) + (X.shape[0] * X.shape[1] - X.data.size) * mean * mean
    dev = np.asarray(X) - mean
    return float(np.einsum("ij,ij->", dev, dev))


def sample(part: tuple, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The block's rows ``rows`` (dense) and their labels."""
    X, y = part
    picked = X[rows]
    return (picked.toarray() if sparse.issparse(picked) else np.array(picked)), y[rows]


def feature_gram(part: tuple, landmarks: Landmarks) -> dict:
    """phi_b^T phi_b (r x r) and the block's kernel trace sum_i k(x_i, x_i)."""
    X = part[0]
    phi = landmarks.features(X)
    return {"G": phi.T @ phi,
            "trace": float(kernel_diagonal(X, **landmarks.args).sum())}


def on_features(part: tuple, *more, fn_: Callable, landmarks_: Landmarks,
                rotation_: np.ndarray, **kwargs):
    """fn(the block's mapped rows, *more, **kwargs), mapping the raw block now: the features
    of a fit whose workers cannot hold them between passes (``_kernel.PerPassFeatures``) are
    computed on every pass and let go when the task ends."""
    return fn_(mapped(part, landmarks_, rotation_), *more, **kwargs)


def mapped(part: tuple, landmarks: Landmarks, rotation: np.ndarray) -> tuple:
    """The block as the kernel fit reads it: (phi(X_b) R, y_b), R = V Sigma the rotation of
    ``MSVMAv._fit_features`` (the features' eigenbasis, scaled)."""
    X, y = part
    return np.ascontiguousarray(landmarks.features(X) @ rotation), y
