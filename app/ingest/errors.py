"""The single exception type of the ingest package."""

from __future__ import annotations


class IngestError(ValueError):
    """A problem with an uploaded file or with the options used to read it.

    ``str(err)`` is a message meant for the person who uploaded the file. The attributes say
    where the problem is, so an API layer can point at it:

    * ``field``  -- the option or input at fault ("label", "drop", "missing", "format",
      "file", "rows", ...), or None;
    * ``row``    -- 1-based line number in the file (for ``encode_rows``: 0-based index into
      the ``rows`` list), or None;
    * ``column`` -- the column's name (or "index N" when it has none), or None.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.row = row
        self.column = column

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        """JSON-able form for an HTTP error body."""
        return {"message": self.message, "field": self.field, "row": self.row,
                "column": self.column}


class IngestLimitError(IngestError):
    """The upload is well-formed but larger than a configured limit (an HTTP layer answers 413).

    Raised before anything proportional to the offending size is allocated. ``setting`` names
    the limit (e.g. ``"max_features"``)."""

    def __init__(self, message: str, *, setting: str, field: str | None = "file",
                 row: int | None = None, column: str | None = None) -> None:
        super().__init__(message, field=field, row=row, column=column)
        self.setting = setting


MAX_ROWS_NAMED = 10  # rows an error lists by line at the most


def rows_phrase(n: int) -> str:
    return "1 row has" if n == 1 else f"{n} rows have"


def missing_error(lines: list[int], columns: list[list[str]], remedy: str,
                  spellings: str = "empty, '?', 'NA' or 'NaN'", unit: str = "line"
                  ) -> IngestError:
    """The one error for rows with missing values, in training and prediction files of every
    format: how many rows, the first ``MAX_ROWS_NAMED`` by file line (``unit`` "row": by
    1-based row, for a Parquet file) with (up to three of) the columns missing in each, then
    ``remedy``. ``row`` and ``column`` point at the first."""
    parts = [f"{unit} {line} ({', '.join(repr(c) for c in cols[:3])})"
             for line, cols in zip(lines[:MAX_ROWS_NAMED], columns, strict=False)]
    more = f" and {len(lines) - MAX_ROWS_NAMED} more" if len(lines) > MAX_ROWS_NAMED else ""
    return IngestError(f"{rows_phrase(len(lines))} missing values ({spellings}): "
                       f"{'; '.join(parts)}{more}. {remedy}", field="missing", row=lines[0],
                       column=columns[0][0])
