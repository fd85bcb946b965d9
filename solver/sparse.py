"""The one int32-CSR helper: LIBLINEAR (scikit-learn's LinearSVC/LinearSVR wrappers) rejects
int64-indexed sparse matrices, and int32 indices halve the index memory of stored data sets.
Used by the comparators before LIBLINEAR and by the service's parsers for every sparse matrix
they build."""

from __future__ import annotations

import numpy as np
from scipy import sparse

_INT32_MAX = np.iinfo(np.int32).max


def int32_csr(X, shape: tuple[int, int] | None = None):
    """CSR, float64, int32 indices, duplicates summed, of ``shape`` (default X's); dense input
    is returned unchanged. X itself when it already is all that; else a new matrix (the
    caller's is never modified). ValueError beyond 2^31 - 1 stored values."""
    if not sparse.issparse(X):
        return X
    X = sparse.csr_matrix(X)
    if X.nnz > _INT32_MAX:
        raise ValueError("X: more than 2^31 - 1 stored values; LIBLINEAR needs int32 indices")
    shape = shape or X.shape
    if (X.indices.dtype == np.int32 and X.indptr.dtype == np.int32 and X.dtype == np.float64
            and X.shape == shape and X.has_canonical_format):
        return X
    out = sparse.csr_matrix((X.data.astype(np.float64, copy=False), X.indices.astype(np.int32),
                             X.indptr.astype(np.int32)), shape=shape)
    # scipy may upcast index arrays on construction; insist on int32.
    out.indices = out.indices.astype(np.int32, copy=False)
    out.indptr = out.indptr.astype(np.int32, copy=False)
    out.sum_duplicates()
    return out
