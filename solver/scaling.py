"""Min-max feature scaling as in the paper: fit to [0, 1] on the training part, applied (and
clipped to [0, 1]) to everything predicted later. The service stores it with each model."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

Matrix = np.ndarray | sp.csr_matrix


@dataclass(frozen=True)
class MinMaxScaling:
    """``x' = clip((x - data_min) * scale, 0, 1)`` per feature; ``scale = 1 / (max - min)``, or 1
    for a constant feature (which then maps to 0 in training)."""

    data_min: np.ndarray  # (n_features,)
    data_max: np.ndarray  # (n_features,)

    @cached_property
    def scale(self) -> np.ndarray:
        """Computed on first use, then kept (the arrays are not changed once fitted or loaded:
        a served model's scaling scales every request's rows with it)."""
        span = self.data_max - self.data_min
        scale = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 1.0)
        scale.flags.writeable = False  # shared by every transform: never changed in place
        return scale

    @classmethod
    def fit(cls, X: Matrix) -> MinMaxScaling:
        if sp.issparse(X):
            lo = np.asarray(X.min(axis=0).todense()).ravel().astype(np.float64)
            hi = np.asarray(X.max(axis=0).todense()).ravel().astype(np.float64)
        else:
            lo = X.min(axis=0).astype(np.float64)
            hi = X.max(axis=0).astype(np.float64)
        return cls(data_min=lo, data_max=hi)

    def transform(self, X: Matrix, *, clip: bool = True, copy: bool = True) -> Matrix:
        """Scaled copy of X, clipped to [0, 1] unless ``clip=False`` (for the rows it was fitted
        on, which are in range already). A CSR matrix stays sparse when every feature's minimum
        is 0 (the usual case for sparse data: implicit zeros stay zeros); otherwise it is
        densified. ``copy=False``: a dense float64 X is scaled in place (and returned)."""
        if not copy and isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2:
            X -= self.data_min
            X *= self.scale
            return np.clip(X, 0.0, 1.0, out=X) if clip else X
        if sp.issparse(X):
            if not np.any(self.data_min):
                out = sp.csr_matrix(X, dtype=np.float64, copy=True)
                out.data *= self.scale[out.indices]
                if clip:
                    np.clip(out.data, 0.0, 1.0, out=out.data)
                out.eliminate_zeros()
                return out
            X = X.toarray()
        out = (np.asarray(X, dtype=np.float64) - self.data_min) * self.scale
        return np.clip(out, 0.0, 1.0, out=out) if clip else out

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"data_min": self.data_min, "data_max": self.data_max}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> MinMaxScaling:
        return cls(data_min=arrays["data_min"], data_max=arrays["data_max"])
