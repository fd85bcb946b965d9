"""Size limits of an upload and the layout (dense or CSR) of its encoded matrix.

Everything here is decided from cheap counts (rows, input columns, encoded width) before the
encoded matrix is built, so a small file can never ask for memory out of proportion to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import IngestError, IngestLimitError

# A one-hot encoded matrix is stored as CSR when it is at least this wide and CSR takes at
# most half the memory of the dense layout (each input column gives at most one non-zero per
# row, 12 bytes each in CSR against 8 per cell dense): bank-full's 16 columns -> 51 features
# qualify (8 MB instead of 18 MB), a one-hot column of 10 values beside a number does not.
SPARSE_MIN_FEATURES = 32
SPARSE_MAX_SHARE = 0.5
# A categorical column is an identifier when more than this share of its (>= ID_MIN_ROWS)
# values are distinct: one-hot would give one column per row and nothing to learn from.
ID_DISTINCT_SHARE = 0.9
ID_MIN_ROWS = 50
CSR_BYTES_PER_ENTRY = 12  # float64 value + int32 column index


@dataclass(frozen=True)
class Limits:
    """Upper bounds an upload must respect (None: unbounded). The names match the service's
    settings (MSVMAV_MAX_ROWS, MSVMAV_MAX_FEATURES, MSVMAV_MAX_ENCODED_BYTES)."""

    max_rows: int | None = None
    max_features: int | None = None
    max_encoded_bytes: int | None = None


NO_LIMITS = Limits()


def _env(setting: str) -> str:
    return f"MSVMAV_{setting.upper()}"


def check_rows(n_rows: int, limits: Limits) -> None:
    if limits.max_rows is not None and n_rows > limits.max_rows:
        raise IngestLimitError(f"The file has {n_rows} data rows; the limit is "
                               f"{limits.max_rows} ({_env('max_rows')}).", setting="max_rows")


def check_features(n_features: int, limits: Limits, *, where: str = "",
                   row: int | None = None, column: str | None = None) -> None:
    if limits.max_features is not None and n_features > limits.max_features:
        prefix = f"{where}: " if where else ""
        raise IngestLimitError(
            f"{prefix}the data would have {n_features} features; the limit is "
            f"{limits.max_features} ({_env('max_features')}).", setting="max_features",
            row=row, column=column)


def choose_sparse(n_rows: int, n_inputs: int, width: int, one_hot: bool) -> bool:
    """CSR for wide one-hot matrices that are mostly zeros; dense otherwise."""
    if not one_hot or width < SPARSE_MIN_FEATURES:
        return False
    csr = encoded_bytes(n_rows, n_inputs, width, True)
    return csr <= SPARSE_MAX_SHARE * encoded_bytes(n_rows, n_inputs, width, False)


def encoded_bytes(n_rows: int, n_inputs: int, width: int, sparse: bool) -> int:
    """Memory of the encoded matrix: rows x width x 8 dense; CSR: an upper bound from nnz."""
    if sparse:
        return n_rows * n_inputs * CSR_BYTES_PER_ENTRY + (n_rows + 1) * 4
    return n_rows * width * 8


def check_budget(n_rows: int, n_inputs: int, width: int, sparse: bool, limits: Limits) -> None:
    """413 (IngestLimitError) when the encoded matrix would exceed the memory budget."""
    check_features(width, limits)
    need = encoded_bytes(n_rows, n_inputs, width, sparse)
    if limits.max_encoded_bytes is not None and need > limits.max_encoded_bytes:
        layout = "sparse" if sparse else "dense"
        raise IngestLimitError(
            f"Encoding the file needs {need} bytes ({n_rows} rows x {width} features, "
            f"{layout}); the limit is {limits.max_encoded_bytes} "
            f"({_env('max_encoded_bytes')}). Drop wide categorical columns or upload fewer "
            "rows.", setting="max_encoded_bytes")


def check_identifier(name: str, n_distinct: int, n_rows: int) -> None:
    """422 for a categorical column whose values are (almost) all distinct."""
    if n_rows >= ID_MIN_ROWS and n_distinct > ID_DISTINCT_SHARE * n_rows:
        raise IngestError(
            f"Column {name!r} looks like an identifier: {n_distinct} of its {n_rows} values "
            "are distinct, so one-hot encoding would add a feature per row and nothing to "
            f"learn from. Add it to drop (drop={name!r}).", field="drop", column=name)


#: Columns a file may have beyond its features (the label, dropped and ignored columns).
EXTRA_COLUMNS = 1024


def max_columns(limits: Limits) -> int | None:
    """The most columns a training file may have: MSVMAV_MAX_FEATURES (each feature column
    gives at least one feature) and ``EXTRA_COLUMNS`` more (the label, dropped columns)."""
    return None if limits.max_features is None else limits.max_features + EXTRA_COLUMNS


def check_columns(n_columns: int, limit: int | None, *, where: str = "The file",
                  row: int | None = None) -> None:
    """413 when a file declares more columns than ``limit`` (before work in proportion)."""
    if limit is not None and n_columns > limit:
        raise IngestLimitError(f"{where} has more than {limit} columns (at least "
                               f"{n_columns}); at most {limit} are accepted "
                               f"({_env('max_features')} and {EXTRA_COLUMNS} more).",
                               setting="max_features", row=row)


#: The longest field (a run of bytes without a delimiter, a space or a line end) a text file
#: may hold: longer, it is refused while the upload is first read, before it is parsed.
MAX_FIELD_BYTES = 1 << 20
_FIELD_ENDS = (b"\n", b"\r", b",", b";", b"\t", b" ")


class FieldScanner:
    """The longest field of a text file fed a block at a time (``feed``): IngestLimitError
    naming the line as soon as a field passes ``limit`` bytes. A piece of at most ``limit``
    bytes cannot hold a longer field by itself, so only the run across pieces is followed:
    each piece's first and last field end (memchr), ~10 ms for 200 MB of ordinary CSV."""

    def __init__(self, limit: int = MAX_FIELD_BYTES) -> None:
        self.limit = limit
        self.run = 0  # bytes of the field still open at the end of the last piece
        self.line = 1

    def feed(self, block: bytes) -> None:
        for at in range(0, len(block), self.limit):
            self._piece(block[at:at + self.limit] if len(block) > self.limit else block)

    def _piece(self, piece: bytes) -> None:
        firsts = [i for i in (piece.find(e) for e in _FIELD_ENDS) if i >= 0]
        if not firsts:
            self.run += len(piece)
            self._check(piece, len(piece))
            return
        self.run += min(firsts)
        self._check(piece, min(firsts))
        self.run = len(piece) - 1 - max(piece.rfind(e) for e in _FIELD_ENDS)
        self.line += piece.count(b"\n")

    def _check(self, piece: bytes, at: int) -> None:
        if self.run > self.limit:
            line = self.line + piece.count(b"\n", 0, at)
            raise IngestLimitError(f"Line {line} holds a field longer than {self.limit} bytes "
                                   "(a value without a delimiter, space or line end); fields "
                                   f"are at most {self.limit} bytes.", setting="max_field_bytes",
                                   row=line)


def check_rows_at(n_rows: int, max_rows: int | None, line: int,
                  setting: str = "max_predict_instances") -> None:
    """413 as a reader reaches row ``n_rows`` (at ``line``) beyond ``max_rows``: the rest of the
    file is not read."""
    if max_rows is not None and n_rows > max_rows:
        raise IngestLimitError(f"Line {line} is data row {n_rows}; at most {max_rows} rows are "
                               f"accepted ({_env(setting)}).", setting=setting, row=line)


_COUNT_BLOCK = 8 << 20


def count_records(content: bytes, comment: bytes | None = None) -> int:
    """Lines of ``content`` holding something: neither empty (or a lone carriage return) nor,
    with ``comment``, starting with it. Read 8 MiB at a time with numpy (~0.1 s for 100 MB),
    so the memory is a block's newline positions."""
    arr = np.frombuffer(content, dtype=np.uint8)
    total, start = 0, 0
    mark = None if comment is None else comment[0]
    for off in range(0, len(arr), _COUNT_BLOCK):
        ends = np.flatnonzero(arr[off:off + _COUNT_BLOCK] == 10) + off
        if not len(ends):
            continue
        starts = np.concatenate(([start], ends[:-1] + 1))
        lengths = ends - starts
        first = arr[starts]
        empty = (lengths == 0) | ((lengths == 1) & (first == 13))
        if mark is not None:
            empty |= (lengths > 0) & (first == mark)
        total += len(ends) - int(empty.sum())
        start = int(ends[-1]) + 1
    rest = bytes(content[start:]).strip()
    return total + (1 if rest and (mark is None or rest[0] != mark) else 0)
