"""Resolving the `label` and `drop` options against a file's column names."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from .errors import IngestError
from .text import preview

_GLOB_CHARS = re.compile(r"[*?\[]")
_INDEX = re.compile(r"-?\d+")


def _index(value: int, n: int, what: str, field: str, names: list[str]) -> int:
    if not -n <= value < n:
        raise IngestError(f"{what} index {value} is out of range: the file has {n} columns "
                          f"(0..{n - 1}): {preview(names)}.", field=field)
    return value % n


def resolve_label(names: list[str], label: str | int | None, default: int) -> int:
    """Column position of the label: a name, a 0-based index (negative counts from the end,
    a digit string from a web form works too), or ``default``.

    A name matches exactly; failing that, it matches ignoring case when exactly one column
    fits ("Class" finds "class"). The column chosen is the encoding's ``label``."""
    n = len(names)
    if label is None:
        return default
    if isinstance(label, bool) or not isinstance(label, int | str):
        raise IngestError("label must be a column name or a 0-based column index.",
                          field="label")
    if isinstance(label, int):
        return _index(label, n, "Label column", "label", names)
    if label in names:
        return names.index(label)
    folded = [j for j, name in enumerate(names) if name.lower() == label.strip().lower()]
    if len(folded) == 1:
        return folded[0]
    if _INDEX.fullmatch(label.strip()):
        return _index(int(label), n, "Label column", "label", names)
    raise IngestError(f"Label column {label!r} not found (names match exactly, or ignoring "
                      f"case when only one column fits); available columns: {preview(names)}.",
                      field="label", column=label)


def resolve_drop(names: list[str], drop: list[str | int] | None, label_idx: int) -> list[int]:
    """Positions of the columns to remove. Globs ("TAG_*") may match nothing and never take
    the label; a plain name or index must exist and must not be the label."""
    if drop is None:
        return []
    if isinstance(drop, str | int):
        drop = [drop]
    out: set[int] = set()
    for item in drop:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise IngestError(f"drop entries must be column names, globs or indexes; got "
                              f"{item!r}.", field="drop")
        if isinstance(item, str) and _GLOB_CHARS.search(item):
            out.update(j for j, name in enumerate(names)
                       if j != label_idx and fnmatchcase(name, item))
            continue
        if isinstance(item, int):
            j = _index(item, len(names), "Dropped column", "drop", names)
        elif item in names:
            j = names.index(item)
        elif _INDEX.fullmatch(item.strip()):
            j = _index(int(item), len(names), "Dropped column", "drop", names)
        else:
            raise IngestError(f"Column {item!r} to drop not found; available columns: "
                              f"{preview(names)}.", field="drop", column=item)
        if j == label_idx:
            raise IngestError(f"Column {names[j]!r} is the label; it cannot also be dropped.",
                              field="drop", column=names[j])
        out.add(j)
    return sorted(out)
