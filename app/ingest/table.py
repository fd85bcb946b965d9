"""The format-neutral intermediate form: named columns of raw string tokens.

CSV and ARFF readers both produce a RawTable; label/drop selection, the missing-value
policy, type inference and encoding then work the same way for both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Declared:
    """A column type stated by the file itself (ARFF); CSV columns have none."""

    kind: str  # "numeric" | "nominal" | "string" | "date"
    categories: list[str] | None = None  # nominal only, in declared order


@dataclass
class RawTable:
    names: list[str]
    declared: list[Declared | None]
    lines: list[int]  # 1-based line number in the file of each data row
    # Exactly one of the two row stores is used. Tokens are stripped; None means missing.
    rows: list[list[str | None]] | None = None
    sparse_rows: list[dict[int, str | None]] | None = None
    has_header: bool = True  # False when names were made up ("x0", "x1", ...)
    delimiter: str | None = None  # CSV only
    #: what ``lines`` count, as messages name it: a text file's "line", a Parquet file's
    #: 1-based "row" (it has no lines)
    unit: str = "line"

    def where(self, i: int) -> str:
        """Row ``i``'s place in the file as a message's subject: "Line 5", "Row 4"."""
        return f"{self.unit.capitalize()} {self.lines[i]}"

    @property
    def n_rows(self) -> int:
        return len(self.lines)

    @property
    def is_sparse(self) -> bool:
        return self.sparse_rows is not None

    def sparse_default(self, j: int) -> str | None:
        """Value of an attribute omitted from a sparse ARFF row.

        ARFF stores the internal value 0 for omitted entries: the number 0 for numeric
        attributes and the *first declared category* for nominal ones. String and date
        attributes have no meaningful 0, so omitted means unknown.
        """
        decl = self.declared[j]
        if decl is None or decl.kind == "numeric":
            return "0"
        if decl.kind == "nominal" and decl.categories:
            return decl.categories[0]
        return None

    def cell(self, i: int, j: int) -> str | None:
        if self.sparse_rows is not None:
            row = self.sparse_rows[i]
            return row[j] if j in row else self.sparse_default(j)
        return self.rows[i][j]  # type: ignore[index]

    def column(self, j: int, row_ids: list[int]) -> list[str | None]:
        if self.sparse_rows is None:
            rows = self.rows
            return [rows[i][j] for i in row_ids]  # type: ignore[index]
        return [self.cell(i, j) for i in row_ids]

