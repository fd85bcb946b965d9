"""svmlight / LIBSVM reading.

scikit-learn's loader (``load_svmlight_file``) reads every file. When it refuses one, a line
by line check finds the line at fault and names it; when no line is at fault (the loader also
refuses pairs out of index order, which we accept), the loader reads the lines the check
rewrote with their pairs in order.
"""

from __future__ import annotations

import io

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from solver import int32_csr

from .errors import MAX_ROWS_NAMED, IngestError, IngestLimitError, missing_error

# Longest index we parse: 18 digits always fit in int64 (anything near is refused by limits).
_MAX_INDEX_DIGITS = 18
_MAX_INDEX = 2**31 - 1  # the loader's indices are C ints


# the one int32-CSR helper (imported under this module's old name)
to_int32_csr = int32_csr


def data_lines(text: str) -> list[int]:
    """Line numbers of the lines the loaders treat as data rows (not blank, not comments)."""
    out = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        if raw.split("#", 1)[0].strip():
            out.append(lineno)
    return out


def _beyond(line: int, index: int, max_features: int) -> IngestLimitError:
    return IngestLimitError(
        f"Line {line}: feature index {index} is beyond the limit of {max_features} features "
        "(MSVMAV_MAX_FEATURES); check the file, or raise the limit.", setting="max_features",
        row=line)


def _pairs(lineno: int, body: list[str], max_features: int | None) -> dict[int, float]:
    """The index:value pairs of one data line (qid dropped); IngestError naming the line, also
    for an index beyond ``max_features`` or beyond what the loader takes (2^31 - 1)."""
    entries: dict[int, float] = {}
    for tok in body:
        key, sep, val = tok.partition(":")
        if sep and key == "qid":
            continue
        if not sep or not key.isdigit() or not key.isascii():
            raise IngestError(f"Line {lineno}: {tok!r} is not an 'index:value' pair.",
                              field="file", row=lineno)
        if len(key.lstrip("0")) > _MAX_INDEX_DIGITS:
            raise IngestLimitError(f"Line {lineno}: feature index {key[:30]} is too large.",
                                   setting="max_features", row=lineno)
        try:
            x = float(val)
        except ValueError:
            raise IngestError(f"Line {lineno}: value {val!r} of feature {key} is not a "
                              "number.", field="file", row=lineno) from None
        idx = int(key)
        if max_features is not None and idx > max_features:
            raise _beyond(lineno, idx, max_features)
        if idx >= _MAX_INDEX:
            raise IngestLimitError(f"Line {lineno}: feature index {idx} is too large.",
                                   setting="max_features", row=lineno)
        if idx in entries:
            raise IngestError(f"Line {lineno}: feature index {idx} appears twice.",
                              field="file", row=lineno)
        entries[idx] = x
    return entries


def _checked(text: str, max_features: int | None) -> bytes:
    """A file the loader refused, line by line: the first line that is wrong is an IngestError
    naming it; when none is (the loader also refuses unsorted indices), the same data lines
    with their pairs in index order, exact (``repr``), for the loader to read."""
    out: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        body = raw.split("#", 1)[0].split()
        if not body:
            continue
        head = body[0]
        if "," in head:
            raise IngestError(f"Line {lineno}: label {head!r} looks multi-label; only one "
                              "label per row is supported.", field="file", row=lineno)
        try:
            label = float(head)
        except ValueError:
            raise IngestError(f"Line {lineno}: the first field must be a numeric label, "
                              f"found {head!r}.", field="file", row=lineno) from None
        entries = _pairs(lineno, body[1:], max_features)
        out.append(" ".join([repr(label), *(f"{i}:{entries[i]!r}" for i in sorted(entries))]))
    return "\n".join(out).encode()


def _load(data: bytes) -> tuple[sp.csr_matrix, np.ndarray]:
    # zero_based=True keeps indices as written; the 0/1-based choice is made below.
    X, y = load_svmlight_file(io.BytesIO(data), dtype=np.float64, zero_based=True)
    return sp.csr_matrix(X), np.asarray(y, dtype=np.float64)


def _read(text: str, max_features: int | None) -> tuple[sp.csr_matrix, np.ndarray]:
    """The one reader, scikit-learn's loader; where it refuses the file, ``_checked`` finds the
    line at fault (or sorts the pairs it wants sorted)."""
    try:
        return _load(text.encode("utf-8"))
    except (ValueError, RuntimeError, OverflowError, TypeError):
        return _load(_checked(text, max_features))


def _entry_line(text: str, X: sp.csr_matrix, pos: int) -> int:
    """File line of the row holding stored entry ``pos`` of X."""
    row = int(np.searchsorted(X.indptr, pos, "right")) - 1
    return data_lines(text)[row]


def read_svmlight(text: str, *, n_features: int | None = None,
                  zero_based: bool | None = None,
                  max_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray, bool]:
    """Return (X as int32 CSR, labels as float64, zero_based used).

    zero_based=None follows scikit-learn's "auto": indices are 1-based unless an index 0
    appears. n_features widens (or checks) the column count, e.g. a9a.t's rows never use
    feature 123. ``max_features`` bounds the width (n_features and the largest index) before
    anything proportional to it exists: IngestLimitError naming the line otherwise.
    """
    if max_features is not None and n_features is not None and n_features > max_features:
        raise IngestLimitError(f"n_features={n_features} exceeds the limit of {max_features} "
                               "features (MSVMAV_MAX_FEATURES).", setting="max_features",
                               field="n_features")
    X, y = _read(text, max_features)
    if max_features is not None and n_features is None and X.nnz:
        # Raw indices are as written; 1-based files may use index max_features itself.
        top = int(X.indices.max())
        if top > max_features or (top == max_features and int(X.indices.min()) == 0):
            raise _beyond(_entry_line(text, X, int(np.argmax(X.indices))), top, max_features)
    if X.shape[0] == 0:
        raise IngestError("The file has no data rows.", field="file")
    has_zero = X.nnz > 0 and int(X.indices.min()) == 0
    if zero_based is None:
        zero_based = has_zero
    if not zero_based:
        if has_zero:
            row = int(np.searchsorted(X.indptr, np.flatnonzero(X.indices == 0)[0], "right")) - 1
            line = data_lines(text)[row]
            raise IngestError(f"Line {line}: feature index 0, but this data uses 1-based "
                              "indices (1..n_features).", field="file", row=line)
        X = sp.csr_matrix((X.data, X.indices - 1, X.indptr),
                          shape=(X.shape[0], max(X.shape[1] - 1, 0)))
    width = X.shape[1]
    if n_features is not None:
        if width > n_features:
            col = np.flatnonzero(X.indices >= n_features)[0]
            row = int(np.searchsorted(X.indptr, col, "right")) - 1
            line = data_lines(text)[row]
            shown = int(X.indices[col]) + (0 if zero_based else 1)
            raise IngestError(f"Line {line}: feature index {shown} exceeds n_features="
                              f"{n_features}.", field="n_features", row=line)
        width = n_features
    bad = ~np.isfinite(y)
    if bad.any():
        line = data_lines(text)[int(np.flatnonzero(bad)[0])]
        raise IngestError(f"Line {line}: the label is not a finite number.",
                          field="file", row=line)
    return to_int32_csr(X, (X.shape[0], width)), y, zero_based


def rows_with(X: sp.csr_matrix, mask: np.ndarray) -> np.ndarray:
    """Row numbers (0-based) of the rows holding any stored entry where mask is True."""
    pos = np.flatnonzero(mask)
    return np.unique(np.searchsorted(X.indptr, pos, "right") - 1)



def check_values(text: str, X: sp.csr_matrix, missing: str, remedy: str) -> np.ndarray | None:
    """The one check of an svmlight file's values (``X`` as ``read_svmlight`` gives it), for
    training and prediction: an infinite value is an error naming its line; rows with a NaN
    (missing) value are ``missing_error`` (``remedy`` its last sentence) when ``missing`` is
    "error", else dropped: the rows to keep, or None for all of them."""
    infinite = rows_with(X, np.isinf(X.data))
    if len(infinite):
        line = data_lines(text)[int(infinite[0])]
        raise IngestError(f"Line {line}: infinite feature value; replace it with a finite "
                          "number.", field="file", row=line)
    nan = np.isnan(X.data)
    if not nan.any():
        return None
    bad = rows_with(X, nan)
    if missing == "error":
        lines = data_lines(text)
        columns = []
        for r in bad[:MAX_ROWS_NAMED].tolist():
            at = slice(X.indptr[r], X.indptr[r + 1])
            columns.append([f"f{j + 1}" for j in X.indices[at][nan[at]].tolist()])
        raise missing_error([lines[int(r)] for r in bad], columns, remedy, spellings="NaN")
    return np.setdiff1d(np.arange(X.shape[0]), bad)
