"""The one encoder: a stored encoding (the JSON ``encoding`` dict of a dataset and of its models)
as an object that turns any input into the feature matrix laid out like training.

``Encoder.from_dict(encoding)`` / ``to_dict()`` (JSON, no pickle; the format is the one
``app.ingest``'s docstring shows, unchanged, so every stored model reads as before).
``transform_table`` encodes rows of a parsed file (the careful readers' RawTable: training and
/predict/file), ``transform_columns`` typed columns (the pandas CSV reader's: training's chunks
and /predict/file's plain CSV), ``transform_sparse`` an svmlight file's matrix (training and
/predict/file), ``transform_rows`` rows or records (/predict: vectorised where it can be, else
cell by cell with the precise row/column error, ``encode_each``), ``transform_matrix`` rows
already read as one float array (a large /predict body). Every path codes a cell through the
column's ``ColumnCoder`` (or, for typed columns, takes the reader's numbers and category
positions), so training and prediction cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from operator import itemgetter
from typing import Any

import numpy as np
import scipy.sparse as sp

from solver import int32_csr

from .column_specs import BadValueError, ColumnCoder, _fail, assemble, feature_specs
from .errors import IngestError
from .table import RawTable
from .text import preview


class Encoder:
    """One stored encoding, ready to encode; built once per model (``from_dict``)."""

    def __init__(self, encoding: dict) -> None:
        self.encoding = encoding
        self.specs = feature_specs(encoding)
        self.names = [s["name"] for s in self.specs]
        # the rest is built when first used (an svmlight file's 10^5 columns need none of it)

    @cached_property
    def coders(self) -> list[ColumnCoder]:
        return [ColumnCoder(s) for s in self.specs]

    @cached_property
    def bases(self) -> list[int]:
        """Each feature's first output column, then the width."""
        return np.cumsum([0] + [c.width for c in self.coders]).tolist()

    @cached_property
    def width(self) -> int:
        return self.bases[-1]

    @cached_property
    def non_label(self) -> list[str]:
        """The training file's columns but the label (a row may give all of them)."""
        label = self.encoding.get("label")
        return [n for n in self.encoding.get("input_columns", self.names) if n != label]

    @cached_property
    def n_wide(self) -> int:
        return len(self.non_label)

    @cached_property
    def wide(self) -> list[int] | None:
        """Each feature's position among ``non_label``."""
        pos = {n: i for i, n in enumerate(self.non_label)}
        return [pos[n] for n in self.names] if all(n in pos for n in self.names) else None

    @cached_property
    def lookups(self) -> list[dict[str, int] | None]:
        # Categories that encode_each's strip() leaves unchanged: an exact hit means the same.
        return [
            {c: i for i, c in enumerate(coder.spec["categories"]) if c == c.strip()}
            if coder.categorical else None
            for coder in self.coders
        ]

    @cached_property
    def plain_numeric(self) -> bool:
        """Every feature a number with no list of allowed values."""
        return all(s["kind"] == "numeric" and s.get("values") is None for s in self.specs)

    @cached_property
    def imputes(self) -> bool:
        """Does any feature impute its missing cells (app.ingest.imputation)?"""
        return any(c.impute for c in self.coders)

    @cached_property
    def getter(self) -> itemgetter | None:
        return itemgetter(*self.names) if self.names else None

    @classmethod
    def from_dict(cls, encoding: dict) -> Encoder:
        return cls(encoding)

    @classmethod
    def from_specs(cls, specs: list[dict]) -> Encoder:
        """An encoder of just these feature columns (while a training file is being read)."""
        return cls({"columns": specs})

    def to_dict(self) -> dict:
        return self.encoding

    # --- a parsed file ----------------------------------------------------------------------

    def transform_table(self, table: RawTable, row_ids: list[int], col_ids: list[int],
                        sparse: bool = False) -> np.ndarray | sp.csr_matrix:
        """The chosen rows of ``table``, its columns ``col_ids`` being the features in order:
        dense, or CSR for sparse tables (and when ``sparse`` asks for it)."""
        if table.is_sparse:
            return self._sparse_table(table, row_ids, col_ids)
        parts = []
        for j, coder, base in zip(col_ids, self.coders, self.bases, strict=False):
            tokens = table.column(j, row_ids)
            fast = coder.code_column(tokens)
            if fast is None:
                offs = np.zeros(len(row_ids), dtype=np.int64)
                vals = np.zeros(len(row_ids), dtype=np.float64)
                for k, tok in enumerate(tokens):
                    try:
                        offs[k], vals[k] = coder.code_token(tok)
                    except BadValueError as exc:
                        line = table.lines[row_ids[k]]
                        raise _fail(exc, table.where(row_ids[k]), line, table.names[j],
                                    "file") from None
            else:
                offs, vals = fast
            parts.append((base, offs, vals))
        return assemble(len(row_ids), self.width, parts, sparse)

    def _sparse_defaults(self, table: RawTable, where: dict) -> list[tuple[int, int, float]]:
        # Omitted entries take the attribute's default; only defaults encoding to a non-zero
        # (one-hot columns, nominal {1,0}) need adding, so the matrix stays as sparse as the
        # file.
        fill: list[tuple[int, int, float]] = []
        for j, (coder, base) in where.items():
            default = table.sparse_default(j)
            try:
                off, val = coder.code(default)
            except BadValueError as exc:
                raise _fail(exc, "Default (omitted) value", None, table.names[j],
                            "file") from None
            if val != 0.0:
                fill.append((j, base + off, val))
        return fill

    def _sparse_table(self, table: RawTable, row_ids: list[int], col_ids: list[int]
                      ) -> sp.csr_matrix:
        where = {j: (coder, base)
                 for j, coder, base in zip(col_ids, self.coders, self.bases, strict=False)}
        fill = self._sparse_defaults(table, where)
        indptr = [0]
        indices: list[int] = []
        data: list[float] = []
        rows = table.sparse_rows
        for i in row_ids:
            row = rows[i]  # type: ignore[index]
            entries: dict[int, float] = {}
            for j, tok in row.items():
                hit = where.get(j)
                if hit is None:
                    continue
                try:
                    off, val = hit[0].code_token(tok)
                except BadValueError as exc:
                    line = table.lines[i]
                    raise _fail(exc, table.where(i), line, table.names[j], "file") from None
                if val != 0.0:
                    entries[hit[1] + off] = val
            for j, col, val in fill:
                if j not in row:
                    entries[col] = val
            for col in sorted(entries):
                indices.append(col)
                data.append(entries[col])
            indptr.append(len(indices))
        return sp.csr_matrix((np.asarray(data, dtype=np.float64), np.asarray(indices, np.int32),
                              np.asarray(indptr, np.int32)), shape=(len(row_ids), self.width))

    def transform_columns(self, n_rows: int, columns: list[np.ndarray], sparse: bool
                          ) -> np.ndarray | sp.csr_matrix:
        """Feature columns a reader already typed, one per feature in order: the numbers of a
        numeric feature, the positions in its categories of a categorical one (the chunked CSV
        reader's blocks). Dense float64, or CSR when ``sparse``."""
        blocks = list(zip(self.coders, self.bases[:-1], columns, strict=True))
        if sparse:
            ones = np.ones(n_rows, dtype=np.float64)
            zeros = np.zeros(n_rows, dtype=np.int64)
            return assemble(n_rows, self.width, [
                (base, v, ones) if coder.categorical else (base, zeros, v)
                for coder, base, v in blocks], True)
        if columns and all(s["kind"] == "numeric" for s in self.specs):
            # numbers only: stacked, then one transposing copy (half the time of column writes)
            return np.ascontiguousarray(np.vstack(columns, dtype=np.float64).T)
        X = np.zeros((n_rows, self.width), dtype=np.float64)
        rows = np.arange(n_rows)
        for coder, base, v in blocks:
            if coder.categorical:
                X[rows, base + v] = 1.0
            else:
                X[:, base] = v
        return X

    def transform_sparse(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """A matrix over the file's input columns (an svmlight file, ``read_svmlight``) -> its
        feature columns (the dropped ones removed), CSR with int32 indices."""
        inputs = self.encoding.get("input_columns", self.names)
        if list(inputs) != self.names:
            pos = {n: j for j, n in enumerate(inputs)}
            X = X[:, [pos[n] for n in self.names]]
        return int32_csr(X)

    # --- rows and records -------------------------------------------------------------------

    def transform_rows(self, rows: Sequence[Any]) -> np.ndarray:
        """Rows (lists) or records (dicts) without label -> float64 X. In bulk when every row
        is one plain shape (``_bulk``), else cell by cell (``encode_each``), which encodes it
        or raises its precise, row-naming error."""
        X = self._bulk(rows) if isinstance(rows, list) and rows else None
        return X if X is not None else self.encode_each(rows)

    def transform_matrix(self, A: np.ndarray | None) -> np.ndarray | None:
        """Rows already read as one finite float array (n, k): encoded as ``transform_rows``
        would encode them, when every feature is plain numeric and k is the feature count (or
        the training file's column count without the label); None otherwise."""
        if A is None or not self.plain_numeric or A.ndim != 2:
            return None
        if self.imputes and np.isnan(A).any():
            return None  # missing cells: the rows' path codes them as their fills
        if A.shape[1] == len(self.names):
            return A
        if self.wide is not None and A.shape[1] == self.n_wide:
            return np.ascontiguousarray(A[:, self.wide])
        return None

    def _row_values(self, r: int, row: Any) -> list[Any]:
        """The feature values of one row or record, in feature order."""
        names = self.names
        if isinstance(row, dict):
            values = []
            for name in names:
                if name not in row:
                    raise IngestError(f"rows[{r}]: missing key {name!r} (every feature column "
                                      f"is required: {preview(names)}).", field="rows", row=r,
                                      column=name)
                values.append(row[name])
            return values
        if isinstance(row, list | tuple | np.ndarray):
            if len(row) == len(names):
                return list(row)
            if self.wide is not None and len(row) == self.n_wide:
                return [row[p] for p in self.wide]
            expected = f"{len(names)}"
            if self.n_wide != len(names):
                expected += f" (or {self.n_wide} with the dropped columns)"
            raise IngestError(f"rows[{r}] has {len(row)} values; expected {expected}: "
                              f"{preview(names)}.", field="rows", row=r)
        raise IngestError(f"rows[{r}] must be a list of values or an object keyed by "
                          "column name.", field="rows", row=r)

    def encode_each(self, rows: Sequence[Sequence | dict]) -> np.ndarray:
        """Cell by cell, naming the row and column of the first cell it cannot encode. A row is
        a record keyed by original column name (other keys are ignored), or a list holding
        either the feature columns in file order, or every non-label input column (dropped
        ones included, and ignored)."""
        if isinstance(rows, dict | str | bytes):
            raise IngestError("rows must be a list of rows (lists or records).", field="rows")
        X = np.zeros((len(rows), self.width), dtype=np.float64)
        for r, row in enumerate(rows):
            values = self._row_values(r, row)
            for coder, base, value in zip(self.coders, self.bases, values, strict=False):
                if type(value) is bool:  # JSON true/false: not silently 1.0/0.0
                    raise IngestError(f"rows[{r}]: column {coder.spec['name']!r}: true/false is "
                                      "not a feature value; give a number, or a category as "
                                      "text.", field="rows", row=r, column=coder.spec["name"])
                try:
                    off, val = coder.code(value)
                except BadValueError as exc:
                    raise _fail(exc, f"rows[{r}]", r, coder.spec["name"], "rows") from None
                X[r, base + off] = val
        return X

    def _bulk(self, rows: list[Any]) -> np.ndarray | None:
        """The vectorised path: only input it encodes exactly like ``encode_each`` — every row
        a list of one width (or every row a record with every feature key), numeric cells
        Python numbers (not booleans), categorical cells exact category strings, every value
        finite. None for anything else."""
        kind = type(rows[0])
        if kind is not list and kind is not dict:
            return None
        if not all(type(r) is kind for r in rows):
            return None
        cols: list[int] | None = None
        if kind is list:
            widths = set(map(len, rows))
            if len(widths) != 1:
                return None
            k = widths.pop()
            if k == len(self.names):
                cols = None
            elif self.wide is not None and k == self.n_wide:
                cols = self.wide
            else:
                return None
            table: list[Any] = rows
        else:
            if self.getter is None:
                return None
            try:
                table = list(map(self.getter, rows))
            except KeyError:
                return None
            if len(self.names) == 1:
                table = [[v] for v in table]
        if self.plain_numeric:
            return self._numeric(table, cols)
        return self._mixed(table, cols)

    def _numeric(self, table: list[Any], cols: list[int] | None) -> np.ndarray | None:
        A = number_table(table)
        if A is None:
            return None
        X = np.array(A if cols is None else A[:, cols], dtype=np.float64, order="C")
        return X if np.isfinite(X).all() else None

    def _mixed(self, table: list[Any], cols: list[int] | None) -> np.ndarray | None:
        columns = list(zip(*table, strict=True))
        if cols is not None:
            columns = [columns[p] for p in cols]
        n = len(table)
        X = np.zeros((n, self.width), dtype=np.float64)
        arange = np.arange(n)
        for coder, lookup, base, column in zip(
            self.coders, self.lookups, self.bases, columns, strict=False
        ):
            if lookup is not None:
                try:
                    idx = np.fromiter((lookup.get(v, -1) for v in column), np.int64, count=n)
                except TypeError:  # an unhashable cell (a list or an object)
                    return None
                if idx.min() < 0:
                    return None
                X[arange, base + idx] = 1.0
                continue
            a = number_table(column, ndim=1)
            if a is None:
                return None
            a = a.astype(np.float64)
            if coder.allowed is not None and not np.isin(a, list(coder.allowed)).all():
                return None
            X[:, base] = a
        return X if np.isfinite(X).all() else None


def encode_rows(encoding: dict, rows: Sequence[Sequence | dict]) -> np.ndarray:
    """Prediction-time rows (no label) -> float64 X laid out like training, cell by cell
    (``Encoder.encode_each``)."""
    return Encoder.from_dict(encoding).encode_each(rows)


def number_table(table: Sequence[Any], ndim: int = 2) -> np.ndarray | None:
    """``np.array(table)`` when the table is rows of one width of Python numbers (``ndim=1``:
    a column of numbers; booleans are not numbers here); None otherwise."""
    try:
        A = np.array(table)
    except (ValueError, TypeError):
        return None
    if A.ndim != ndim or A.dtype.kind not in "iuf" or has_boolean(table, A):
        return None
    return A


# Tables of at most this many cells are looked through in Python (a one-row request: ~1 µs
# for 30 cells, against ~4 µs for the vectorised comparison's NumPy calls).
SCAN_CELLS = 64


def has_boolean(cells: Sequence[Any], A: np.ndarray) -> bool:
    """Did JSON true/false hide among numbers (numpy turns them into 1/0)? In a larger table
    only cells equal to 0 or 1 are looked at in Python, so real-valued batches cost one
    vectorised comparison; a small one (SCAN_CELLS) is looked through cell by cell."""
    if A.size <= SCAN_CELLS:
        if A.ndim == 1:
            return any(type(cell) is bool for cell in cells)
        return any(type(cell) is bool for row in cells for cell in row)
    where = np.nonzero((A == 0) | (A == 1))
    if A.ndim == 1:
        return any(type(cells[i]) is bool for i in where[0].tolist())
    return any(type(cells[i][j]) is bool for i, j in zip(*(w.tolist() for w in where), strict=True))
