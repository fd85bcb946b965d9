"""Size limits of an upload and the layout (dense or CSR) of its encoded matrix.

Everything here is decided from cheap counts (rows, input columns, encoded width) before the
encoded matrix is built, so a small file can never ask for memory out of proportion to it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
