"""Arrays <-> bytes for the ``*_arrays`` tables: npy format, never pickle; stored in chunks.

A dense matrix is one blob ``<name>``; a CSR matrix is four blobs ``<name>.data``,
``<name>.indices``, ``<name>.indptr`` and ``<name>.shape``. Labels of unicode dtype round-trip
as npy without pickle; object arrays are refused.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.lib.format as npformat
import scipy.sparse as sp
from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

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



# --- Arrays in the database, in bounded chunks ------------------------------------------------
#
# An array is the bytes of its npy file (header, then the raw C-order data), cut into rows of
# at most ``chunk_bytes`` numbered 0, 1, 2, ... in the ``chunk`` column. No row is larger than a
# chunk, so neither PostgreSQL's 1 GB value limit (hit at ~512 MiB once bytea is sent as hex)
# nor SQLite's blob limit applies to the array. A row written before revision 0006 is one whole
# npy file at chunk 0: the reader takes it as is. Reading preallocates the array from the header
# and copies each chunk into it (PostgreSQL sends the chunks in binary), so the array is never
# held twice; a dense int8 matrix is read into float64 so, converted chunk by chunk.

DEFAULT_CHUNK_BYTES = 64 * 1024 * 1024


def _owner_column(table: Any) -> Any:
    return table.dataset_id if hasattr(table, "dataset_id") else table.model_id


def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The npy (version 1.0) header of a C-order array of ``shape`` and ``dtype``."""
    buf = io.BytesIO()
    npformat.write_array_header_1_0(
        buf,
        {"descr": npformat.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape},
    )
    return buf.getvalue()


# PostgreSQL compresses a large bytea with pglz by default: ~15 MB/s on a chunk of 0/1 bytes,
# the most of a large upload's time. lz4 (PostgreSQL 14+, when the server is built with it)
# is ~10x faster and still halves such a chunk. ``set_config(..., true)`` is ``SET LOCAL``:
# it holds until the transaction ends, and only where the server offers lz4.
_LZ4 = text(
    "SELECT set_config('default_toast_compression', 'lz4', true) FROM pg_settings "
    "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
)


def fast_toast_compression(session: Session) -> None:
    """On PostgreSQL, compress the values this transaction writes with lz4 where available
    (once per transaction or savepoint: a model's many small arrays cost one round trip)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    transaction = session.get_nested_transaction() or session.get_transaction()
    if transaction is None or session.info.get("lz4_transaction") is not transaction:
        session.execute(_LZ4)
        session.info["lz4_transaction"] = (
            session.get_nested_transaction() or session.get_transaction())


class ArrayWriter:
    """Writes one array's npy bytes as chunk rows, a piece at a time: ``write`` takes rows (or
    bytes) in order; ``close`` flushes the last partial chunk. Rows go through Core inserts, so
    the session keeps no copy of them."""

    def __init__(
        self, session: Session, table: Any, owner_id: int, name: str, chunk_bytes: int
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be positive")
        self._session, self._table, self._name = session, table, name
        self._owner = _owner_column(table).key
        self._owner_id, self._chunk_bytes = owner_id, chunk_bytes
        self._pending = bytearray()
        self._next = 0
        self.nbytes = 0
        fast_toast_compression(session)

    def write(self, data: np.ndarray | bytes | bytearray | memoryview) -> None:
        view = memoryview(np.ascontiguousarray(data)).cast("B") if isinstance(
            data, np.ndarray
        ) else memoryview(data).cast("B")
        self.nbytes += len(view)
        while len(view):
            take = min(len(view), self._chunk_bytes - len(self._pending))
            if not self._pending and take == self._chunk_bytes:
                self._insert(bytes(view[:take]))
            else:
                self._pending += view[:take]
                if len(self._pending) == self._chunk_bytes:
                    self._insert(bytes(self._pending))
                    self._pending = bytearray()
            view = view[take:]

    def close(self) -> None:
        if self._pending or self._next == 0:
            self._insert(bytes(self._pending))
            self._pending = bytearray()

    def _insert(self, data: bytes) -> None:
        values = {self._owner: self._owner_id, "name": self._name, "chunk": self._next}
        self._session.execute(insert(self._table), [{**values, "data": data}])
        self._next += 1


def write_array(
    session: Session, table: Any, owner_id: int, name: str, a: np.ndarray, chunk_bytes: int
) -> None:
    """Store ``a`` (any size; object dtype refused) as npy chunks of at most ``chunk_bytes``."""
    a = np.asarray(a)
    if a.dtype == object:
        raise TypeError("object arrays cannot be stored without pickle")
    writer = ArrayWriter(session, table, owner_id, name, chunk_bytes)
    writer.write(npy_header(a.shape, a.dtype))
    writer.write(a.reshape(-1) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1))
    writer.close()


def write_matrix(
    session: Session, table: Any, owner_id: int, name: str, X: Any, chunk_bytes: int
) -> None:
    """A feature matrix: dense (n, d) as ``name``, CSR as its four parts (``matrix_to_blobs``'s
    names)."""
    if not sp.issparse(X):
        write_array(session, table, owner_id, name, X, chunk_bytes)
        return
    X = sp.csr_matrix(X)
    parts = {"data": X.data, "indices": X.indices, "indptr": X.indptr,
             "shape": np.asarray(X.shape, dtype=np.int64)}
    for k, v in parts.items():
        write_array(session, table, owner_id, f"{name}.{k}", v, chunk_bytes)


def _chunk_query(table: Any, owner_id: int) -> Any:
    return select(table.name, table.data).where(_owner_column(table) == owner_id)


def _fetch(session: Session, query: Any) -> list[tuple[str, Any]]:
    """Rows (name, data) of ``query``; on psycopg the data comes in binary (not as hex text,
    twice its size), through SQLAlchemy all the same (its events see the query)."""
    conn = session.connection()
    if conn.dialect.driver != "psycopg":
        return [(n, d) for n, d in conn.execute(query)]
    raw = conn.connection.driver_connection
    factory = raw.cursor_factory
    raw.cursor_factory = _binary_cursor(factory)
    try:
        return [(n, d) for n, d in conn.execute(query)]
    finally:
        raw.cursor_factory = factory


@functools.cache
def _binary_cursor(factory: type) -> type:
    """``factory`` (a psycopg cursor class) whose results come in binary format."""

    class BinaryResults(factory):  # type: ignore[misc, valid-type]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("binary", True)
            return super().execute(query, params, **kwargs)

    return BinaryResults


class _Filler:
    """One array being read: preallocated from its npy header (in ``dtype`` when given, else
    the stored one) and filled with the stored values a chunk at a time, converted as they
    come, so that neither the stored array nor a second copy is ever held."""

    def __init__(self, first: Any, dtype: np.dtype | None, pad: float | None = None) -> None:
        buf = io.BytesIO(first)
        version = npformat.read_magic(buf)
        read_header = (npformat.read_array_header_1_0 if version == (1, 0)
                       else npformat.read_array_header_2_0)
        shape, fortran, self.stored = read_header(buf)
        if self.stored.hasobject:
            raise TypeError("object arrays cannot be read without pickle")
        self._size = int(np.prod(shape))
        self._flat: np.ndarray | None = None
        if pad is not None and len(shape) == 2 and not fortran and shape[1] > 0:
            # the rows side by side with one more column holding ``pad``: the array is the
            # (n, d) view of an (n, d + 1) one, filled a row at a time
            wide = np.empty((shape[0], shape[1] + 1), dtype=dtype or self.stored)
            wide[:, -1] = pad
            self.array = wide[:, :-1]
        else:
            out = np.empty(shape[::-1] if fortran else shape, dtype=dtype or self.stored)
            self.array = out.T if fortran else out
            self._flat = out.reshape(-1)  # a view: ``out`` is new and C-ordered
        self._filled = 0
        self._carry = b""  # the bytes of a value cut by a chunk's end
        self.feed(memoryview(first)[buf.tell():])

    @property
    def done(self) -> bool:
        return self._filled == self._size and not self._carry

    def feed(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        size = self.stored.itemsize
        if self._carry:
            need = size - len(self._carry)
            self._carry += bytes(view[:need])
            view = view[need:]
            if len(self._carry) == size:
                self._put(np.frombuffer(self._carry, dtype=self.stored))
                self._carry = b""
        whole = len(view) - len(view) % size
        self._put(np.frombuffer(view[:whole], dtype=self.stored))
        self._carry += bytes(view[whole:])

    def _put(self, values: np.ndarray) -> None:
        end = self._filled + len(values)
        if end > self._size:
            raise ValueError("a stored array is longer than its npy header says")
        if self._flat is not None:
            self._flat[self._filled : end] = values  # a copy, converted to the array's dtype
        else:
            self._put_rows(values)
        self._filled = end

    def _put_rows(self, values: np.ndarray) -> None:
        """values at the flat positions from ``_filled`` on, into the padded rows: the rest of
        a row begun by the previous chunk, whole rows, then the start of the next row."""
        d = self.array.shape[1]
        row, col = divmod(self._filled, d)
        head = min(len(values), (d - col) % d)
        if head:
            self.array[row, col : col + head] = values[:head]
            row += col + head == d
        whole = (len(values) - head) // d
        self.array[row : row + whole] = values[head : head + whole * d].reshape(whole, d)
        tail = values[head + whole * d :]
        if tail.size:
            self.array[row + whole, : tail.size] = tail


def read_arrays(
    session: Session, table: Any, owner_id: int, dtypes: Mapping[str, Any] | None = None,
    pads: Mapping[str, float] | None = None, skip: str | None = None, only: str | None = None,
) -> dict[str, np.ndarray]:
    """Every array of one owner, by name: the first chunks in one query, then each further
    chunk of a large array in its own query (one chunk in memory beside the array).
    ``dtypes``: {name: dtype} for arrays wanted in another dtype than stored (int8 -> float64:
    converted chunk by chunk into the one array). ``pads``: {name: value} for 2-d arrays wanted
    as the first columns of an array one column wider, whose last column holds the value (the
    (n, d) view of an (n, d + 1) array: solver.msvmav.augment's intercept column, so that the
    fit appends it without copying the rows). ``skip``: a name prefix of arrays not read;
    ``only``: the prefix of the only ones read."""
    query = _chunk_query(table, owner_id)
    if skip is not None:
        query = query.where(~table.name.startswith(skip, autoescape=True))
    if only is not None:
        query = query.where(table.name.startswith(only, autoescape=True))
    out: dict[str, np.ndarray] = {}
    for name, first in _fetch(session, query.where(table.chunk == 0)):
        want = (dtypes or {}).get(name)
        filler = _Filler(first, None if want is None else np.dtype(want), (pads or {}).get(name))
        del first
        chunk = 1
        while not filler.done:
            rows = _fetch(session, query.where(table.name == name, table.chunk == chunk))
            if not rows:
                raise ValueError(f"array {name!r} of {owner_id} is missing chunk {chunk}")
            filler.feed(rows[0][1])
            del rows
            chunk += 1
        out[name] = filler.array
    return out


def arrays_to_matrix(name: str, arrays: Mapping[str, np.ndarray]) -> np.ndarray | sp.csr_matrix:
    """The feature matrix ``write_matrix`` stored under ``name``."""
    if name in arrays:
        return arrays[name]
    parts = {k: arrays[f"{name}.{k}"] for k in CSR_PARTS}
    shape = tuple(int(s) for s in parts["shape"])
    return sp.csr_matrix((parts["data"], parts["indices"], parts["indptr"]), shape=shape)
