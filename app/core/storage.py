"""Arrays <-> bytes for the ``*_arrays`` tables: npy format, never pickle.

A dense matrix is one blob ``<name>``; a CSR matrix is four blobs ``<name>.data``,
``<name>.indices``, ``<name>.indptr`` and ``<name>.shape``. Labels of unicode dtype round-trip
as npy without pickle; object arrays are refused.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

CSR_PARTS = ("data", "indices", "indptr", "shape")


def array_to_bytes(a: np.ndarray) -> bytes:
    a = np.asarray(a)
    if a.dtype == object:
        raise TypeError("object arrays cannot be stored without pickle")
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def npy_length(head: bytes) -> int:
    """The number of elements of a stored 1-d array, from the first bytes of its npy blob."""
    stream = io.BytesIO(head)
    version = np.lib.format.read_magic(stream)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    shape, _, _ = read(stream)
    return int(np.prod(shape))


def bytes_to_array(b: bytes) -> np.ndarray:
    return np.load(io.BytesIO(b), allow_pickle=False)


def matrix_to_blobs(name: str, X: np.ndarray | sp.spmatrix | sp.sparray) -> dict[str, bytes]:
    """Blobs for a feature matrix: dense (n, d) or CSR."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        parts = {
            "data": X.data,
            "indices": X.indices,
            "indptr": X.indptr,
            "shape": np.asarray(X.shape, dtype=np.int64),
        }
        return {f"{name}.{k}": array_to_bytes(v) for k, v in parts.items()}
    return {name: array_to_bytes(X)}


def blobs_to_matrix(name: str, blobs: Mapping[str, bytes]) -> np.ndarray | sp.csr_matrix:
    if name in blobs:
        return bytes_to_array(blobs[name])
    parts = {k: bytes_to_array(blobs[f"{name}.{k}"]) for k in CSR_PARTS}
    shape = tuple(int(s) for s in parts["shape"])
    return sp.csr_matrix((parts["data"], parts["indices"], parts["indptr"]), shape=shape)
