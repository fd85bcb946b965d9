"""CSV/TSV reading: delimiter and header sniffing, quoting, ragged-row detection."""

from __future__ import annotations

import csv
import io
from collections import Counter
from typing import Any

from .errors import IngestError
from .limits import check_rows_at
from .table import RawTable
from .text import clean_token, is_number

CANDIDATE_DELIMITERS = ("\t", ";", ",")  # preference order when several fit
_DELIMITER_ALIASES = {"\\t": "\t", "tab": "\t", "comma": ",", "semicolon": ";"}
_SNIFF_LINES = 50
_HEADER_SAMPLE = 1000


def is_whitespace_delimiter(delimiter: str | None) -> bool:
    """``delimiter=whitespace`` (or a single space): fields split by runs of spaces and tabs,
    as UCI's ``.dat`` files are."""
    return isinstance(delimiter, str) and (delimiter == " "
                                           or delimiter.strip().lower() == "whitespace")


def looks_whitespace_separated(text: str) -> bool:
    """The first lines hold no comma, semicolon or quote, do not split on tabs alone into one
    constant number (> 1) of fields (TSV), and do on runs of white space."""
    head = _first_lines(text, _SNIFF_LINES)
    if not head or any(c in line for line in head for c in (",", ";", '"')):
        return False
    tabbed = {len(line.split("\t")) for line in head}
    if len(tabbed) == 1 and tabbed.pop() > 1:
        return False
    widths = {len(line.split()) for line in head}
    return len(widths) == 1 and widths.pop() > 1


def whitespace_to_tabs(text: str) -> str:
    """Whitespace-separated text as tab-separated text (each run of white space one tab,
    leading and trailing white space dropped), for the CSV readers."""
    return "\n".join("\t".join(line.split()) for line in text.splitlines()) + "\n"


def normalize_delimiter(delimiter: str) -> str:
    """Accept a single character, or spellings a web form tends to send for tab."""
    if not isinstance(delimiter, str):
        raise IngestError("delimiter must be a single character such as ',', ';' or tab.",
                          field="delimiter")
    d = _DELIMITER_ALIASES.get(delimiter.lower(), delimiter)
    if len(d) != 1 or d in "\r\n\"' " or d.isalnum():
        raise IngestError(f"delimiter {delimiter!r} is not usable: give one character such "
                          "as ',', ';' or tab, or 'whitespace'.", field="delimiter")
    return d


def _reader(text: str, delimiter: str):
    # skipinitialspace lets '1, "a,b"' be read as a quoted field after the space.
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter,
                      skipinitialspace=True)


def _is_blank(record: list[str]) -> bool:
    return all(not f.strip() for f in record)


def _width(record: list[str]) -> int:
    n = len(record)
    if n > 1 and not record[-1].strip():  # a trailing delimiter does not make a column
        n -= 1
    return n


def _first_lines(text: str, n: int) -> list[str]:
    """The first ``n`` non-blank lines (as ``str.splitlines`` cuts them) without splitting
    the whole text."""
    size = 1 << 13
    while True:
        chunk = text[:size]
        lines = chunk.splitlines()
        if len(chunk) < len(text):
            lines = lines[:-1]  # may be cut short
        head = [line for line in lines if line.strip()][:n]
        if len(head) >= n or len(chunk) == len(text):
            return head
        size *= 4


def sniff_delimiter(text: str, preferred: str | None = None) -> str:
    """Pick the candidate that splits the first lines into a constant number (>1) of fields."""
    head = _first_lines(text, _SNIFF_LINES)
    sample = "\n".join(head)
    candidates = ([preferred] if preferred else []) + list(CANDIDATE_DELIMITERS)
    best, best_median = ",", 1
    for cand in candidates:
        try:
            widths = [_width(r) for r in _reader(sample, cand) if not _is_blank(r)]
        except csv.Error:
            continue
        if not widths:
            continue
        if min(widths) > 1 and len(set(widths)) == 1:
            return cand
        median = sorted(widths)[len(widths) // 2]
        if median > best_median:  # ragged under every candidate: most fields wins
            best, best_median = cand, median
    return best


def sniff_header(first: list[str | None], rest: list[list[str | None]]) -> bool:
    """Decide whether the first record names the columns.

    Strongest evidence: a text cell on top of a column whose later cells are all numbers.
    A first record with a number in it is data. A first record of text over text columns
    is a header if none of its values reappears below in its own column.
    """
    for j, tok in enumerate(first):
        if tok is None or is_number(tok):
            continue
        below = [r[j] for r in rest if j < len(r) and r[j] is not None]
        if below and all(is_number(t) for t in below):
            return True
    if any(tok is not None and is_number(tok) for tok in first):
        return False
    if not rest:
        return True
    for j, tok in enumerate(first):
        if tok is not None and any(j < len(r) and r[j] == tok for r in rest):
            return False
    return True


def _decide_header(records: list[list[str]], lines: list[int], header: bool | None,
                   delimiter: str | None, known_names: set[str] | None) -> bool:
    """Whether the first record is a header, from the first records of the file (only the
    first 1 + _HEADER_SAMPLE are looked at); also refuses a file that does not split."""
    if not records:
        raise IngestError("The file has no data rows.", field="file")
    if delimiter is None and all(len(r) == 1 for r in records[:_SNIFF_LINES]):
        # A data file needs a label and a feature: one column means the delimiter is
        # something we do not split on (often spaces).
        spaced = " " in records[0][0].strip()
        raise IngestError(
            "Found a single column: none of ',', ';' or tab splits the lines"
            + (" (the values look space-separated, which is not supported; convert the file"
               " to CSV or TSV)" if spaced else "") + ". Pass delimiter if it is another "
            "character.", field="delimiter", row=lines[0])
    if header is not None:
        return header
    cleaned_first = [clean_token(f) for f in records[0]]
    if known_names and not all(t is None or is_number(t) for t in cleaned_first) and any(
            t in known_names for t in cleaned_first if t is not None):
        return True
    sample = [[clean_token(f) for f in r] for r in records[1:1 + _HEADER_SAMPLE]]
    return sniff_header(cleaned_first, sample)


def header_names(record: list[str], line: int) -> list[str]:
    """The column names a header record gives: stripped, an empty one named "x{j}" (its
    position); IngestError naming a name given twice. The careful reader's rule, which the
    pandas readers take through ``plain_header``."""
    names = [h.strip() or f"x{j}" for j, h in enumerate(record)]
    seen: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in seen:
            raise IngestError(
                f"The header names column {name!r} twice (indexes {seen[name]} and {j}); "
                "rename one of them.", field="file", row=line, column=name)
        seen[name] = j
    return names


def first_record(text: str, delimiter: str) -> list[str]:
    """The first non-blank record of delimited text as the careful reader splits it (the csv
    module, spaces after a delimiter skipped; ``delimiter`` "whitespace": runs of white
    space); [] when there is none. A batch job's submission takes its columns so."""
    if is_whitespace_delimiter(delimiter):
        return next((line.split() for line in text.splitlines() if line.strip()), [])
    reader = _reader(text, normalize_delimiter(delimiter))
    try:
        return next((r for r in reader if not _is_blank(r)), [])
    except csv.Error as exc:
        raise IngestError(f"Line {reader.line_num + 1}: cannot read this CSV line ({exc}).",
                          field="file", row=reader.line_num + 1) from None


def plain_header(record: list[str]) -> list[str] | None:
    """``header_names`` of a header the pandas readers take as it is: every name given, each
    once (pandas would rename an empty or a repeated one); None otherwise (the careful reader
    then reads the file and words the error)."""
    if not all(h.strip() for h in record):
        return None
    try:
        return header_names(record, 1)
    except IngestError:
        return None


def _records(reader: Any, limit: int | None = None) -> tuple[list[list[str]], list[int]]:
    """The non-blank records of ``reader`` (at most ``limit``) and the line each ends on;
    csv.Error propagates (the caller words it, with ``reader.line_num``)."""
    records: list[list[str]] = []
    lines: list[int] = []
    for record in reader:
        if _is_blank(record):
            continue
        records.append(record)
        lines.append(reader.line_num)
        if limit is not None and len(records) >= limit:
            break
    return records, lines


def sniff_layout(text: str, *, header: bool | None = None, delimiter: str | None = None
                 ) -> tuple[str, bool, list[list[str]]] | None:
    """(delimiter, has header, first records) decided exactly as ``read_csv`` decides them,
    from the first records only; None when those cannot be read (read_csv explains)."""
    delim = normalize_delimiter(delimiter) if delimiter else sniff_delimiter(text)
    try:
        records, lines = _records(_reader(text, delim), limit=_HEADER_SAMPLE + 1)
    except csv.Error:
        return None
    has_header = _decide_header(records, lines, header, delimiter, None)
    return delim, has_header, records


def read_csv(text: str, *, header: bool | None = None, delimiter: str | None = None,
             preferred_delimiter: str | None = None,
             known_names: set[str] | None = None, max_rows: int | None = None) -> RawTable:
    """Read delimited text into a RawTable (tokens stripped, missing spellings -> None).

    ``known_names`` (prediction time) marks a first record that uses the training column
    names as a header even when header sniffing alone would be unsure. More than ``max_rows``
    data rows: IngestLimitError naming the first line beyond, the rest not read.
    """
    delim = normalize_delimiter(delimiter) if delimiter else sniff_delimiter(
        text, preferred_delimiter)
    reader = _reader(text, delim)
    try:
        records, lines = _records(reader, None if max_rows is None else max_rows + 2)
    except csv.Error as exc:
        raise IngestError(f"Line {reader.line_num + 1}: cannot read this CSV line ({exc}).",
                          field="file", row=reader.line_num + 1) from None
    header = _decide_header(records, lines, header, delimiter, known_names)

    head = records[0] if header else None
    body, body_lines = (records[1:], lines[1:]) if header else (records, lines)
    if not body:
        raise IngestError("The file has a header row but no data rows.", field="file")
    if max_rows is not None and len(body) > max_rows:
        check_rows_at(len(body), max_rows, body_lines[max_rows])

    # A trailing delimiter on every line (header included) is not a column.
    if all(len(r) > 1 and not r[-1].strip() for r in body) and (
            head is None or (len(head) > 1 and not head[-1].strip())):
        body = [r[:-1] for r in body]
        head = head[:-1] if head is not None else None

    width = len(head) if head is not None else Counter(_width(r) for r in body).most_common(1)[0][0]
    if head is not None and len(head) > 1 and not head[-1].strip() and _width(body[0]) == width - 1:
        head = head[:-1]
        width -= 1

    rows: list[list[str | None]] = []
    for record, line in zip(body, body_lines, strict=True):
        if len(record) == width + 1 and not record[-1].strip():
            record = record[:-1]  # tolerate a trailing delimiter on this line
        if len(record) != width:
            what = "the header has" if head is not None else "the other rows have"
            raise IngestError(
                f"Line {line} has {len(record)} fields but {what} {width} "
                f"(delimiter {delim!r}); check for a missing or extra delimiter or an "
                "unbalanced quote.", field="file", row=line)
        rows.append([clean_token(f) for f in record])

    names = header_names(head, lines[0]) if head is not None else [f"x{j}" for j in range(width)]
    return RawTable(names=names, declared=[None] * width, lines=body_lines, rows=rows,
                    has_header=head is not None, delimiter=delim)
