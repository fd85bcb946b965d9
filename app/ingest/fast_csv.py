"""The fast path for training CSV/TSV uploads: pandas' C parser plus vectorised typing.

``read_columns`` returns the file as typed columns (numbers, or codes into sorted
categories) when it is certain to agree with the careful reader (``csv_format.read_csv``),
and None otherwise: any missing value, short or long row, non-finite number, odd header or
parser complaint sends the file to the careful reader, which reads it itself or explains
precisely (line and column) what is wrong. The fast path never raises for a bad file.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from .csv_format import sniff_layout
from .errors import IngestError
from .text import clean_token, parse_number


@dataclass
class Column:
    name: str
    values: np.ndarray  # float64 (numeric) or int64 codes into ``categories``
    categories: list[str] | None = None  # None: numeric


@dataclass
class ColumnTable:
    names: list[str]
    columns: list[Column]
    has_header: bool
    delimiter: str
    n_rows: int


def _numeric(values: np.ndarray, check_underscores: bool) -> np.ndarray | None:
    try:
        out = values.astype(np.float64)  # float() per cell, as the careful reader does
    except (ValueError, TypeError):
        return None
    if not np.isfinite(out).all():
        return None  # missing (NaN, short rows) or infinite: the careful reader decides
    if check_underscores and any("_" in v for v in values):
        return None  # float() reads "1_000"; the careful reader calls it text
    return out


def _categorical(values: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    import pandas as pd

    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if len(codes) and codes.min() < 0:
        return None  # a missing field (short row)
    stripped = [clean_token(u) if isinstance(u, str) else None for u in uniques]
    if any(s is None for s in stripped):
        return None  # missing values: the careful reader applies the missing policy
    if all(parse_number(s) is not None for s in stripped):  # type: ignore[arg-type]
        return None
    categories = sorted(set(stripped))  # type: ignore[arg-type]
    position = {c: i for i, c in enumerate(categories)}
    lut = np.fromiter((position[s] for s in stripped), dtype=np.int64,  # type: ignore[index]
                      count=len(stripped))
    return lut[codes], categories


def _column_values(series, check_underscores: bool) -> np.ndarray | None:
    """float64 values of a column the C parser typed as numbers; None if it did not."""
    kind = series.dtype.kind
    if kind in "if" and series.dtype.itemsize == 8:
        out = series.to_numpy(dtype=np.float64)
        return out if np.isfinite(out).all() else None
    if kind in "bu":
        return None  # "True"/"False" typed as bool, huge integers: the careful reader decides
    return _numeric(series.to_numpy(dtype=object), check_underscores)


def read_columns(text: str, *, header: bool | None = None,
                 delimiter: str | None = None) -> ColumnTable | None:
    """Typed columns of a training CSV, or None when the careful reader must read it."""
    import pandas as pd

    try:
        layout = sniff_layout(text, header=header, delimiter=delimiter)
    except IngestError:
        return None
    if layout is None:
        return None
    delim, has_header, records = layout
    first = records[0]
    if has_header and any(len(r) != len(first) for r in records[1:]):
        # Data rows longer than the header would become pandas' index: never guess.
        return None
    try:
        frame = pd.read_csv(io.StringIO(text), sep=delim, header=0 if has_header else None,
                            na_filter=False, keep_default_na=False, skipinitialspace=True,
                            skip_blank_lines=True, engine="c", quotechar='"',
                            doublequote=True, comment=None, on_bad_lines="error",
                            low_memory=False)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeError,
            OverflowError, MemoryError):
        return None
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0:
        return None
    width = frame.shape[1]
    if width < 2 or frame.shape[0] == 0:
        return None
    if has_header:
        head = [h.strip() for h in first]
        # Duplicate or empty names come back renamed ("a.1", "Unnamed: 3"), but names equal
        # only once stripped ("a", "a ") do not: the careful reader refuses both.
        if ([str(c).strip() for c in frame.columns] != head or "" in head
                or len(set(head)) != len(head)):
            return None
        names = head
    else:
        names = [f"x{j}" for j in range(width)]
    underscores = "_" in text
    columns = []
    for j in range(width):
        series = frame.iloc[:, j]
        values = _column_values(series, underscores)
        if values is not None:
            columns.append(Column(names[j], values))
            continue
        if series.dtype.kind in "iufb":
            return None
        coded = _categorical(series.to_numpy(dtype=object))
        if coded is None:
            return None
        columns.append(Column(names[j], coded[0], coded[1]))
    return ColumnTable(names=names, columns=columns, has_header=has_header, delimiter=delim,
                       n_rows=frame.shape[0])
