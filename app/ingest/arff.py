"""A small ARFF reader (dense and sparse rows) that keeps exact line numbers.

scipy.io.arff cannot read sparse ARFF and reports no line numbers, hence this reader.
Supported: @relation, @attribute with numeric/real/integer (optionally with a KEEL-style
[min, max] range), nominal {a, 'b c', "d"}, string and date types; '%' comment lines
anywhere; case-insensitive keywords; quoted names and values; CRLF line ends; '?' missing;
sparse rows "{index value, ...}". KEEL's @inputs/@outputs lines are ignored.
"""

from __future__ import annotations

import re

from .errors import IngestError
from .limits import check_columns, check_rows_at
from .table import Declared, RawTable

_NUMERIC_TYPES = ("numeric", "real", "integer")
_IGNORED_KEYWORDS = ("@inputs", "@input", "@outputs", "@output")


def split_quoted(text: str, sep: str, line: int) -> list[tuple[str, bool]]:
    """Split on ``sep`` outside '...' / "..." quotes; yields (token, was_quoted).

    Backslash escapes are honoured inside quotes, as Weka writes them.
    """
    if "'" not in text and '"' not in text:  # the common case, ~10x faster
        return [(t.strip(), False) for t in text.split(sep)]
    out: list[tuple[str, bool]] = []
    buf: list[str] = []
    quoted = False
    quote: str | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote is not None:
            if ch == "\\" and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
            else:
                buf.append(ch)
        elif ch in "'\"" and (not buf or buf[-1].isspace()):
            # A quote opens at the start of a token or after a space ("3 'a b'" in
            # sparse rows); inside a word (O'Brien) it is an ordinary character.
            quote, quoted = ch, True
        elif ch == sep:
            out.append(("".join(buf).strip(), quoted))
            buf, quoted = [], False
        else:
            buf.append(ch)
        i += 1
    if quote is not None:
        raise IngestError(f"Line {line}: unbalanced quote {quote}.", field="file", row=line)
    out.append(("".join(buf).strip(), quoted))
    return out


def _unquote_name(rest: str, line: int) -> tuple[str, str]:
    """Split '@attribute' arguments into (name, type text)."""
    rest = rest.strip()
    if rest[:1] in ("'", '"'):
        q = rest[0]
        m = re.match(q + r"((?:\\.|[^" + q + r"\\])*)" + q, rest)
        if not m:
            raise IngestError(f"Line {line}: unbalanced quote in attribute name.",
                              field="file", row=line)
        name = re.sub(r"\\(.)", r"\1", m.group(1))
        return name, rest[m.end():].strip()
    m = re.match(r"([^\s{]+)\s*(.*)$", rest)
    if not m:
        raise IngestError(f"Line {line}: @attribute needs a name and a type.",
                          field="file", row=line)
    return m.group(1), m.group(2).strip()


def _parse_type(type_text: str, name: str, line: int) -> Declared:
    low = type_text.lower()
    if low.startswith("{"):
        if not type_text.rstrip().endswith("}"):
            raise IngestError(f"Line {line}: nominal attribute {name!r} lacks its closing '}}'.",
                              field="file", row=line, column=name)
        cats = [tok for tok, _ in split_quoted(type_text.strip()[1:-1], ",", line)]
        if not cats or any(c == "" for c in cats):
            raise IngestError(f"Line {line}: nominal attribute {name!r} has an empty category.",
                              field="file", row=line, column=name)
        return Declared("nominal", cats)
    word = re.match(r"[a-z]*", low).group(0)
    if word in _NUMERIC_TYPES:
        return Declared("numeric")
    if word in ("string", "date"):
        return Declared(word)
    raise IngestError(
        f"Line {line}: attribute {name!r} has type {type_text!r}; supported types are "
        "numeric/real/integer, nominal {a,b,...}, string and date.",
        field="file", row=line, column=name)


def _dense_tokens(raw: str, line: int) -> list[str | None]:
    if "'" in raw or '"' in raw:
        parts = split_quoted(raw, ",", line)
        return [t if q else (None if t in ("", "?") else t) for t, q in parts]
    out: list[str | None] = []
    for t in raw.split(","):
        t = t.strip()
        out.append(None if t in ("", "?") else t)
    return out


def _sparse_tokens(raw: str, n_attr: int, line: int) -> dict[int, str | None]:
    body = raw.strip()
    if not body.endswith("}"):
        raise IngestError(f"Line {line}: sparse row does not end with '}}'.",
                          field="file", row=line)
    row: dict[int, str | None] = {}
    for item, quoted in split_quoted(body[1:-1], ",", line):
        if not item:
            continue
        parts = item.split(None, 1)
        if len(parts) != 2 or not parts[0].isdigit():
            raise IngestError(f"Line {line}: sparse entry {item!r} is not 'index value'.",
                              field="file", row=line)
        idx = int(parts[0])
        if idx >= n_attr:
            raise IngestError(f"Line {line}: sparse index {idx} is out of range (the file "
                              f"declares {n_attr} attributes, indexes 0..{n_attr - 1}).",
                              field="file", row=line)
        val = parts[1].strip()
        row[idx] = val if quoted else (None if val == "?" else val)
    return row


def _read_header(lines_iter, max_attributes: int | None = None
                 ) -> tuple[list[str], list[Declared | None]]:
    """The attributes of the header, read up to and including its @data line; more than
    ``max_attributes`` of them is refused (413) as the one beyond is reached."""
    names: list[str] = []
    seen: set[str] = set()  # (a list's ``in`` made the header quadratic: 60,000 attributes 60 s)
    declared: list[Declared | None] = []
    in_data = False
    for lineno, raw in lines_iter:
        s = raw.strip()
        if not s or s.startswith("%"):
            continue
        low = s.lower()
        if low.startswith("@data"):
            in_data = True
            break
        if low.startswith("@relation") or low.startswith(_IGNORED_KEYWORDS):
            continue
        if low.startswith("@attribute"):
            name, type_text = _unquote_name(s[len("@attribute"):], lineno)
            if name in seen:
                raise IngestError(f"Line {lineno}: attribute {name!r} is declared twice.",
                                  field="file", row=lineno, column=name)
            check_columns(len(names) + 1, max_attributes, where="The ARFF header", row=lineno)
            seen.add(name)
            names.append(name)
            declared.append(_parse_type(type_text, name, lineno))
            continue
        raise IngestError(f"Line {lineno}: expected @relation, @attribute or @data in the "
                          f"ARFF header, found {s[:40]!r}.", field="file", row=lineno)
    if not names:
        raise IngestError("The ARFF header declares no @attribute.", field="file")
    if not in_data:
        raise IngestError("The ARFF file has no @data section.", field="file")
    return names, declared


def arff_header(text: str, max_attributes: int | None = None) -> tuple[list[str], int]:
    """The attribute names of an ARFF file's header (``text``: at least its header) and the
    line number of its @data line (a batch job reads the rows after it in chunks)."""
    at = [0]

    def numbered():  # (remembers the last line _read_header took: its @data line)
        for lineno, raw in enumerate(text.split("\n"), start=1):
            at[0] = lineno
            yield lineno, raw

    names, _ = _read_header(numbered(), max_attributes)
    return names, at[0]


def read_arff(text: str, *, max_attributes: int | None = None,
              max_rows: int | None = None) -> RawTable:
    """A whole ARFF file; at most ``max_attributes`` attributes and ``max_rows`` data rows
    (413 as the one beyond is reached, naming its line)."""
    lines_iter = iter(enumerate(text.split("\n"), start=1))
    names, declared = _read_header(lines_iter, max_attributes)
    n_attr = len(names)
    dense: list[list[str | None]] = []
    sparse: list[dict[int, str | None]] = []
    row_lines: list[int] = []
    any_sparse = False
    for lineno, raw in lines_iter:
        s = raw.strip()
        if not s or s.startswith("%"):
            continue
        if max_rows is not None and len(row_lines) >= max_rows:
            check_rows_at(len(row_lines) + 1, max_rows, lineno)
        if s.startswith("{"):
            any_sparse = True
            sparse.append(_sparse_tokens(s, n_attr, lineno))
            dense.append([])  # keeps positions aligned until we know the file's kind
        else:
            tokens = _dense_tokens(s, lineno)
            if len(tokens) == n_attr + 1 and tokens[-1] is None:
                tokens.pop()  # trailing comma
            if len(tokens) != n_attr:
                raise IngestError(f"Line {lineno} has {len(tokens)} values but the header "
                                  f"declares {n_attr} attributes.", field="file", row=lineno)
            dense.append(tokens)
            sparse.append({})
        row_lines.append(lineno)
    if not row_lines:
        raise IngestError("The ARFF file has no data rows after @data.", field="file")
    table = RawTable(names=names, declared=declared, lines=row_lines)
    if any_sparse:
        # A dense row inside a sparse file becomes a sparse row listing every attribute.
        table.sparse_rows = [s_row if not d_row else dict(enumerate(d_row))
                             for s_row, d_row in zip(sparse, dense, strict=True)]
    else:
        table.rows = dense
    return table
