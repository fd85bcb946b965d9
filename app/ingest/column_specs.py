"""Column specs (the stored "encoding") and turning raw values into feature columns.

One code path encodes both training and prediction data, so the two cannot drift apart.
Every input cell becomes exactly one (offset, value) pair inside its column's block:
numeric -> (0, x); categorical -> (category position, 1.0) i.e. one-hot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from .errors import IngestError
from .table import Declared
from .text import MISSING_TOKENS, parse_number, preview

ENCODING_VERSION = 1


class BadValueError(Exception):
    """A cell that cannot be encoded; the caller adds where it is."""


def infer_spec(name: str, declared: Declared | None, tokens: Sequence[str | None],
               sparse: bool) -> dict:
    """The encoding entry of one feature column.

    ARFF declarations are authoritative: numeric stays numeric, nominal is one-hot in the
    declared order (even when the categories are numbers, like phishing's {-1,0,1}). The
    exception is sparse ARFF, where a nominal attribute with numeric categories (bibtex's
    {0,1}) is kept as one numeric column: one-hot would add a column that is 1 wherever the
    entry is omitted, i.e. densify the matrix. Undeclared (CSV) and string columns are
    numeric when every present value is a number, else one-hot with sorted categories.
    """
    if declared is not None and declared.kind == "numeric":
        return {"name": name, "kind": "numeric"}
    if declared is not None and declared.kind == "nominal":
        cats = list(declared.categories or [])
        nums = [parse_number(c) for c in cats]
        if sparse and all(v is not None and math.isfinite(v) for v in nums):
            return {"name": name, "kind": "numeric", "values": nums}
        return {"name": name, "kind": "categorical", "categories": cats}
    if declared is not None and declared.kind == "date":
        raise IngestError(f"Column {name!r} holds dates, which cannot be used as features; "
                          "add it to drop.", field="drop", column=name)
    if declared is not None and sparse:
        raise IngestError(f"String attribute {name!r} is not supported in sparse ARFF; add it "
                          "to drop.", field="drop", column=name)
    present = [t for t in tokens if t is not None]
    if all(parse_number(t) is not None for t in present):
        return {"name": name, "kind": "numeric"}
    return {"name": name, "kind": "categorical", "categories": sorted(set(present))}


def spec_width(spec: dict) -> int:
    return len(spec["categories"]) if spec["kind"] == "categorical" else 1


def spec_feature_names(spec: dict) -> list[str]:
    if spec["kind"] == "categorical":
        return [f"{spec['name']}={c}" for c in spec["categories"]]
    return [spec["name"]]


_TOO_LARGE = "the number does not fit a float64 (its magnitude is beyond 1.8e308)"


def _as_number(value: object) -> float:
    if isinstance(value, str):
        tok = value.strip()
        if tok in MISSING_TOKENS or tok.lower() == "nan":
            raise BadValueError("missing value")
        x = parse_number(tok)
        if x is None:
            raise BadValueError(f"{value!r} is not a number")
    elif value is None:
        raise BadValueError("missing value")
    else:
        try:
            x = float(value)  # ints, floats, numpy scalars, bools (as 0/1)
        except OverflowError:  # an integer beyond float64's range (e.g. 401 digits)
            raise BadValueError(_TOO_LARGE) from None
        except (TypeError, ValueError):
            raise BadValueError(f"{value!r} is not a number") from None
    if math.isnan(x):
        raise BadValueError("missing value (NaN)")
    if math.isinf(x):
        raise BadValueError(f"infinite value {value!r}")
    return x


class ColumnCoder:
    """Encodes single cells of one column according to its spec."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.categorical = spec["kind"] == "categorical"
        self.width = spec_width(spec)
        # An unseen category: an error, or (handle_unknown "ignore", chosen at training) a
        # row of zeros in the column's one-hot block, as scikit-learn's OneHotEncoder does.
        self.ignore_unknown = spec.get("handle_unknown") == "ignore"
        # A missing cell of an imputed column: its fill's code once training fitted it
        # (app.ingest.imputation), NaN before (a dataset's stored matrix keeps it missing).
        impute = spec.get("impute")
        self.impute = impute is not None
        self.fill_code: tuple[int, float] = (0, math.nan)
        if self.categorical:
            cats = spec["categories"]
            self.exact = {c: i for i, c in enumerate(cats)}
            # Numbers match numeric categories by value: 1, "1.0" and "+1" all mean "1".
            self.by_value: dict[float, int] = {}
            for i, c in enumerate(cats):
                v = parse_number(c)
                if v is not None:
                    self.by_value.setdefault(v, i)
        else:
            values = spec.get("values")
            self.allowed = set(values) if values is not None else None
        # Discrete columns see few distinct tokens: remember their codes (sparse ARFF).
        self.discrete = self.categorical or self.allowed is not None
        self.cache: dict[object, tuple[int, float]] = {}
        if impute is not None and "fill" in impute:
            self.fill_code = self._fill_code(impute["fill"])

    def _fill_code(self, fill: object) -> tuple[int, float]:
        if not self.categorical:
            return 0, float(fill)  # type: ignore[arg-type]
        index = self.exact.get(fill)  # type: ignore[arg-type]
        return (0, 0.0) if index is None else (index, 1.0)

    def code_token(self, tok: str | None) -> tuple[int, float]:
        """code() for file tokens, with a fast path for the common cases."""
        if self.discrete:
            hit = self.cache.get(tok)
            if hit is None:
                hit = self.cache[tok] = self.code(tok)
            return hit
        if tok is not None and "_" not in tok:
            try:
                x = float(tok)
            except ValueError:
                return self.code(tok)
            if math.isfinite(x):
                return 0, x
        return self.code(tok)

    def code_column(self, tokens: list[str | None]) -> tuple[np.ndarray, np.ndarray] | None:
        """Vectorised (offsets, values) for a whole column; None if any cell needs the
        per-cell path (which then produces the precise error)."""
        n = len(tokens)
        if self.categorical:
            exact = self.exact
            idx = np.fromiter((exact.get(t, -1) for t in tokens), dtype=np.int64, count=n)
            if n and idx.min() < 0:
                return None
            return idx, np.ones(n)  # (unknown or missing cells: the per-cell path decides)
        if None in tokens:
            return None
        try:
            vals = np.asarray(tokens, dtype=np.float64)
        except (ValueError, TypeError):
            return None
        if not np.isfinite(vals).all() or "_" in "".join(tokens):  # type: ignore[arg-type]
            return None
        if self.allowed is not None and not np.isin(vals, list(self.allowed)).all():
            return None
        return np.zeros(n, dtype=np.int64), vals

    def code(self, value: object) -> tuple[int, float]:
        if self.impute and is_missing(value):
            return self.fill_code
        if not self.categorical:
            x = _as_number(value)
            if self.allowed is not None and x not in self.allowed:
                raise BadValueError(f"value {value!r} is not one of the allowed values "
                               f"{preview(self.spec['values'])}")
            return 0, x
        if value is None:
            raise BadValueError("missing value")
        if isinstance(value, float) and math.isnan(value):
            raise BadValueError("missing value (NaN)")
        key = value.strip() if isinstance(value, str) else str(value)
        if key in self.exact:
            return self.exact[key], 1.0
        if key in MISSING_TOKENS:
            raise BadValueError("missing value")
        num = parse_number(key)
        if num is not None and num in self.by_value:
            return self.by_value[num], 1.0
        if self.ignore_unknown:
            return 0, 0.0
        raise BadValueError(f"unknown category {value!r}; allowed values: "
                       f"{preview(self.spec['categories'])}")


def is_missing(value: object) -> bool:
    """None, NaN, or a string spelling a missing value."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        tok = value.strip()
        return tok in MISSING_TOKENS or tok.lower() == "nan"
    return False


def _fail(exc: BadValueError, where: str, row: int | None, column: str, field: str) -> IngestError:
    return IngestError(f"{where}, column {column!r}: {exc}.", field=field, row=row,
                       column=column)


def assemble(n_rows: int, width: int, parts: list[tuple[int, np.ndarray, np.ndarray]],
             sparse: bool) -> np.ndarray | sp.csr_matrix:
    """The encoded matrix from per-column blocks ``(base, offsets, values)`` (one entry per
    row): dense float64, or CSR with int32 indices (explicit zeros dropped)."""
    if not sparse:
        X = np.zeros((n_rows, width), dtype=np.float64)
        arange = np.arange(n_rows)
        for base, offs, vals in parts:
            X[arange, base + offs] = vals
        return X
    k = len(parts)
    cols = np.empty((n_rows, k), dtype=np.int32)
    data = np.empty((n_rows, k), dtype=np.float64)
    for c, (base, offs, vals) in enumerate(parts):
        cols[:, c] = base + offs
        data[:, c] = vals
    # Blocks are in column order and each adds one entry per row: rows come out sorted.
    X = sp.csr_matrix((data.ravel(), cols.ravel(),
                       np.arange(0, n_rows * k + 1, k, dtype=np.int64)), shape=(n_rows, width))
    X.eliminate_zeros()
    X.indices = X.indices.astype(np.int32, copy=False)
    X.indptr = X.indptr.astype(np.int32, copy=False)
    return X


HANDLE_UNKNOWN = ("error", "ignore")


def with_handle_unknown(encoding: dict, handle_unknown: str) -> dict:
    """The encoding with ``handle_unknown`` set on each categorical column (a model's: chosen
    at training, kept with the model); the encoding itself when there is none to set."""
    if handle_unknown == "error" or not isinstance(encoding.get("columns"), list):
        return encoding
    columns = [{**c, "handle_unknown": handle_unknown} if c.get("kind") == "categorical" else c
               for c in encoding["columns"]]
    return {**encoding, "columns": columns}


def feature_specs(encoding: dict) -> list[dict]:
    if not isinstance(encoding, dict) or not isinstance(encoding.get("columns"), list):
        raise IngestError("The stored encoding is not valid (no 'columns' list).",
                          field="encoding")
    return encoding["columns"]


# What a model adds to its dataset's column specs, none of which changes the encoded layout.
MODEL_KEYS = ("handle_unknown", "impute")


def same_layout(a: dict, b: dict) -> bool:
    """Do two encodings give the same feature columns (a model's and a dataset's: the model's
    handle_unknown and imputation fills aside)?"""
    def bare(encoding: dict) -> list | None:
        columns = encoding.get("columns")
        if not isinstance(columns, list):
            return None
        return [{k: v for k, v in c.items() if k not in MODEL_KEYS} for c in columns]
    return bare(a) == bare(b)
