"""X_A^T X_A for the "gram" path (``_linear_step.GramSystem``): built from the active rows, and
rows that enter or leave A added into it in place.

Only G's upper triangle is read (BLAS dsymv with ``lower=1`` on the Fortran-ordered view G.T),
so a fold of sparse rows writes only that triangle: half the pairs. A build writes both.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import sparse
from scipy.linalg import blas

# scipy's sparse kernels, called directly by _RowProduct: the one private API the house takes
# (tests/test_structure.py says why). P @ B where they are missing or take other arguments.
try:
    from scipy.sparse._sparsetools import csr_matmat as _csr_matmat
    from scipy.sparse._sparsetools import csr_todense as _csr_todense
except ImportError:  # pragma: no cover - a scipy that moved them
    _csr_matmat = _csr_todense = None

from ._footprint import CSR_VALUE, FLOAT
from ._linalg import symmetrize_from_upper
from ._row_blocks import PARALLEL_MIN_NNZ, run_parallel, sparse_view, split_rows

# Building X_A^T X_A: rows with more than D / DENSE_ROW values are multiplied densified; a fold
# densifies such rows too.
DENSE_ROW = 16
# Temporaries of a build from dense rows, or of a fold, stay within about this many bytes.
CHUNK_BYTES = 16 * 2**20
# A sparse build's output rows are formed this many bytes (values and column indices) at a time.
OUTPUT_BYTES = 2 * 2**20
# A sparse build multiplies G's upper triangle in this many bands of rows (see _upper_gram):
# k bands multiply (k + 1) / (2 k) of the whole product's pairs and convert (k - 1) / 2 of X_A's
# values to CSR. Measured on bench/wide.py's 100k x 2,000 (50k active rows, one core): 8 bands
# 0.49 s, 4 0.46 s, 3 0.41 s, 2 0.43 s, 1 0.52 s.
UPPER_BANDS = 3
# A sparse build's rows are cut into at most this many pieces, one a thread, each summed into
# a D x D array of its own (all but the first: extra memory of 8 D^2 bytes a piece).
BUILD_PARTS = 2
# Bytes a pair of values costs in a sparse fold: its flat index and its product, and the
# temporaries they are formed from.
PAIR_BYTES = 40


def stored(X, rows: np.ndarray) -> int:
    """Values stored in the given rows of X (dense: all D of each)."""
    if sparse.issparse(X):
        return int(np.sum(X.indptr[rows + 1] - X.indptr[rows]))
    return rows.size * X.shape[1]


def fold_pairs(X, rows: np.ndarray) -> int:
    """Entries of G's upper triangle a fold of these rows adds to (with multiplicity)."""
    D = X.shape[1]
    counts = (X.indptr[rows + 1] - X.indptr[rows]) if sparse.issparse(X) else np.full(rows.size, D)
    counts = np.where(counts * DENSE_ROW > D, D, counts).astype(np.int64)
    return int(np.sum(counts * (counts + 1) // 2))


def rows_gram(X, mask: np.ndarray, threads: int = 1) -> np.ndarray:
    """X_A^T X_A as a C-contiguous (D, D) array for the rows in mask: CSR rows as one sparse
    product (its output rows split between ``threads``) while they are sparse enough (at most
    D / DENSE_ROW values a row); else, and for dense X, CHUNK_BYTES of rows at a time,
    densified, into BLAS dsyrk."""
    rows = np.flatnonzero(mask)
    D = X.shape[1]
    if sparse.issparse(X) and stored(X, rows) * DENSE_ROW <= rows.size * D:
        return _sparse_gram(X, rows, threads)
    G = np.zeros((D, D))
    step = max(1, CHUNK_BYTES // (FLOAT * D))
    for lo in range(0, rows.size, step):
        block = X[rows[lo:lo + step]]
        block = block.toarray() if sparse.issparse(block) else block
        # the upper triangle of G (the lower one of the Fortran-ordered G.T) += B^T B in place;
        # B^T is B's Fortran-ordered view, so BLAS reads the block without a copy
        out = blas.dsyrk(1.0, block.T, beta=1.0, c=G.T, trans=0, lower=1, overwrite_c=1)
        if not np.shares_memory(out, G):  # pragma: no cover - f2py copied after all
            G[:] = out.T
    return symmetrize_from_upper(G)


def _sparse_gram(X, rows: np.ndarray, threads: int) -> np.ndarray:
    """X_A^T X_A for sparse rows: A's rows cut into ``threads`` pieces (at most BUILD_PARTS) of
    about equal stored values (one where they hold fewer than PARALLEL_MIN_NNZ), each piece's
    Gram matrix's upper triangle formed by one thread (``_upper_gram``), the first into G and
    each other into a D x D array of its own, added into G; then the upper triangle copied onto
    the lower one. Every thread converts its own rows (a third of the build's time on one
    thread: X_A's transpose and its bands' columns), and no thread waits for another until the
    sum."""
    D = X.shape[1]
    G = np.zeros((D, D))
    if rows.size == 0:
        return G
    counts = X.indptr[rows + 1] - X.indptr[rows]
    total = int(counts.sum())
    parts = min(threads, BUILD_PARTS) if total >= PARALLEL_MIN_NNZ else 1
    bounds = np.r_[0, np.cumsum(counts)]
    pieces = [rows[lo:hi] for lo, hi in split_rows(bounds, parts)]
    targets = [G] + [np.zeros((D, D)) for _ in pieces[1:]]
    run_parallel(lambda k: _upper_gram(X, pieces[k], targets[k]), list(range(len(pieces))))
    for extra in targets[1:]:
        G += extra
    return symmetrize_from_upper(G)


def _upper_gram(X, rows: np.ndarray, G: np.ndarray) -> None:
    """G's upper triangle = X_R^T X_R for the rows R, on this thread: B = X_R (CSR) and
    A^T = X_R^T (its CSC arrays, read as CSR). G's rows are cut into UPPER_BANDS bands of equal
    height, and a band's rows [lo, hi) are the product of A^T's rows with X_R's columns from lo
    on (converted from A^T's arrays once a band; X_R itself is then freed): about
    (k + 1) / (2 k) of the products of the whole matrix."""
    D = X.shape[1]
    B = sparse.csr_matrix(X[rows])
    AT = B.tocsc()  # its (indptr, indices, data) are those of X_R^T in CSR
    edges = np.linspace(0, D, min(UPPER_BANDS, D) + 1).astype(int)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        right = B if lo == 0 else _columns_from(AT, lo)  # X_R's columns from lo on, as CSR
        B = None  # after the first band, only A^T and one band's columns are alive
        _product_rows(AT, right, (lo, hi), G, lo)
        del right


def _columns_from(AT, lo: int) -> sparse.csr_matrix:
    """X_A[:, lo:] as CSR, from X_A's CSC form AT: a view of its columns from lo on,
    converted."""
    a = AT.indptr[lo]
    view = sparse_view(sparse.csc_matrix, (AT.shape[0], AT.shape[1] - lo),
                       (AT.indptr[lo:] - a, AT.indices[a:], AT.data[a:]))
    return view.tocsr()


def _product_rows(AT, B, span: tuple[int, int], G: np.ndarray, first: int) -> None:
    """G[lo:hi, first:] = (A^T B)[lo:hi] for A^T given by AT's CSC arrays (as CSR) and B the
    columns of X_A from ``first`` on, OUTPUT_BYTES of output rows at a time: each part's sparse
    product is small enough to stay in the cache until it is copied into G."""
    lo, hi = span
    width = B.shape[1]
    step = max(1, OUTPUT_BYTES // (CSR_VALUE * width))
    # one index type for both operands (a band's columns of X_A may have narrower indices
    # than A^T's: the kernel takes one type, and a narrowing cast would wrap)
    index = np.result_type(AT.indptr, AT.indices, B.indptr, B.indices)
    product = _RowProduct(B, min(step, hi - lo), index)
    for start in range(lo, hi, step):
        end = min(start + step, hi)
        a, b = AT.indptr[start], AT.indptr[end]
        G[start:end, first:] = product.dense(AT.indptr[start:end + 1] - a, AT.indices[a:b],
                                             AT.data[a:b])


class _RowProduct:
    """Dense blocks of (P B) for CSR row blocks P of at most ``rows`` rows and a fixed CSR B,
    every index array of both of type ``index``.

    scipy's kernels (``_sparsetools``: the ones ``P @ B`` and ``.toarray()`` run) are called
    directly: the product's output arrays are allocated once at their bound (``rows`` x B's
    width: a dense block's values), so the symbolic pass ``P @ B`` makes first to size them
    (``csr_matmat_maxnnz``, half the multiply's time here) and the sparse matrices around each
    part are not needed. Where those kernels are not there (another scipy), ``P @ B``."""

    def __init__(self, B, rows: int, index: np.dtype) -> None:
        self.B, self.width, self.index = B, B.shape[1], index
        self.Bp = B.indptr.astype(self.index, copy=False)
        self.Bj = B.indices.astype(self.index, copy=False)
        self.direct = _csr_matmat is not None and B.data.dtype == np.float64
        self.block = np.zeros((rows, self.width))
        if self.direct:
            self.Cp = np.empty(rows + 1, self.index)
            self.Cj = np.empty(rows * self.width, self.index)
            self.Cx = np.empty(rows * self.width)

    def dense(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> np.ndarray:
        """(P B) as a dense (rows, width) view of this object's block (valid until the next
        call), for P = (indptr, indices, data)."""
        rows = indptr.size - 1
        out = self.block[:rows]
        out[:] = 0.0  # both kernels add into ``out`` (toarray on some scipy versions)
        if self.direct and data.dtype == np.float64:
            index = self.index
            try:
                _csr_matmat(rows, self.width, indptr.astype(index, copy=False),
                            indices.astype(index, copy=False), data, self.Bp, self.Bj,
                            self.B.data, self.Cp, self.Cj, self.Cx)
                _csr_todense(rows, self.width, self.Cp, self.Cj, self.Cx, out)
                return out
            except (TypeError, ValueError):  # a scipy whose kernel takes other arguments
                self.direct = False
                out[:] = 0.0
        part = sparse_view(sparse.csr_matrix, (rows, self.B.shape[0]), (indptr, indices, data))
        (part @ self.B).toarray(out=out)
        return out


def fold(G: np.ndarray, U, sign: np.ndarray) -> None:
    """G += U^T diag(sign) U in place (G C-contiguous): at least its upper triangle. Sparse
    rows of at most D / DENSE_ROW values add their pairs (i <= j) into the upper triangle;
    other rows (and dense U) are densified a chunk at a time into BLAS dgemm (both
    triangles)."""
    D = G.shape[1]
    if not sparse.issparse(U):
        _fold_dense(G, U, sign)
        return
    U = sparse.csr_matrix(U)
    U.sum_duplicates()  # sorted columns: a pair's first column is its smaller one
    lengths = np.diff(U.indptr)
    wide = np.flatnonzero(lengths * DENSE_ROW > D)
    if wide.size:
        _fold_dense(G, U[wide], sign[wide])
    flat = G.reshape(-1)  # a view
    for k in np.unique(lengths[(lengths > 0) & (lengths * DENSE_ROW <= D)]):
        _fold_pairs(flat, D, U, sign, np.flatnonzero(lengths == k), int(k))


def _fold_pairs(flat: np.ndarray, D: int, U, sign: np.ndarray, rows: np.ndarray, k: int) -> None:
    """The upper-triangle pairs of ``rows`` (each with k sorted values) added into G."""
    first, second = _upper_pairs(k)
    index_type = np.int32 if D * D < 2**31 else np.intp
    step = max(1, CHUNK_BYTES // (PAIR_BYTES * first.size))
    for lo in range(0, rows.size, step):
        part = rows[lo:lo + step]
        at = U.indptr[part][:, None] + np.arange(k)
        cols = U.indices[at].astype(index_type)
        values = U.data[at]
        index = (cols * index_type(D))[:, first]
        index += cols[:, second]
        products = (values * sign[part][:, None])[:, first]
        products *= values[:, second]
        np.add.at(flat, index.ravel(), products.ravel())


@functools.lru_cache(maxsize=64)
def _upper_pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) for 0 <= i <= j < k, as two index arrays (read-only: they are shared)."""
    first, second = np.triu_indices(k)
    first.flags.writeable = second.flags.writeable = False
    return first, second


def _fold_dense(G: np.ndarray, U, sign: np.ndarray) -> None:
    """G += U^T diag(sign) U, rows densified CHUNK_BYTES at a time, by dgemm into G^T (the
    Fortran-ordered view of the symmetric G): no D x D temporary."""
    p, D = U.shape
    step = max(1, CHUNK_BYTES // (FLOAT * D))
    for lo in range(0, p, step):
        part, s = U[lo:lo + step], sign[lo:lo + step]
        part = part.toarray() if sparse.issparse(part) else np.ascontiguousarray(part)
        out = blas.dgemm(1.0, part.T, (part * s[:, None]).T, beta=1.0, c=G.T, trans_b=1,
                         overwrite_c=1)
        if not np.shares_memory(out, G):  # pragma: no cover - f2py copied after all
            G[:] = out.T


def build_bytes(n: int, D: int, nnz: int | None) -> int:
    """Peak temporaries of ``rows_gram`` for up to n rows holding nnz values (None: dense)."""
    chunks = 2 * min(CHUNK_BYTES, FLOAT * n * D)
    if nnz is None or (nnz / max(n, 1)) * DENSE_ROW > D:
        return chunks
    # X_A's transpose and X_A (or one band's columns of it), over all pieces; each piece's
    # output rows (values and column indices) and their dense block; each piece's D x D array
    # but the first (where the rows are cut into pieces)
    block = FLOAT * OUTPUT_BYTES // CSR_VALUE
    pieces = FLOAT * D * D * (BUILD_PARTS - 1) if nnz >= PARALLEL_MIN_NNZ else 0
    return 2 * CSR_VALUE * nnz + BUILD_PARTS * (OUTPUT_BYTES + block + CSR_VALUE * D) + pieces
