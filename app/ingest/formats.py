"""The one format registry: every file format the service reads, by name, alias, extension and
content, for every door that takes a file (POST /datasets, /predict/file, batch jobs).

``detect(head, filename, declared)`` decides in this order: the ``format`` option (a name or an
alias), else the file name's extension, else its first bytes: Parquet's ``PAR1`` magic, an ARFF
``@``/``%`` header, a JSON object per line (JSON Lines), svmlight ``label index:value`` lines,
then the delimiter of the first line (tab: tsv; comma or semicolon: csv; runs of spaces alone:
whitespace), csv when nothing else fits.

Each format names its ``reader`` (the parser family that reads it): "csv" for delimited text
(csv, tsv, whitespace: the CSV reader takes the delimiter), "svmlight", "arff", "parquet",
"jsonl".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from .errors import IngestError

PARQUET_MAGIC = b"PAR1"
#: bytes of a file's start that content detection reads
SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True)
class Format:
    """One file format: its ``name``, the other spellings a ``format`` option may use, the
    file-name extensions that mean it, and the reader family that parses it."""

    name: str
    reader: str
    aliases: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    binary: bool = False


FORMATS: tuple[Format, ...] = (
    Format("csv", "csv", ("text",), (".csv",)),
    Format("tsv", "csv", ("tab",), (".tsv", ".tab")),
    # no extension: a .txt or .dat file may be anything, its content decides
    Format("whitespace", "csv", ("spaces",)),
    Format("svmlight", "svmlight", ("libsvm", "svm"), (".svm", ".libsvm", ".svmlight")),
    Format("arff", "arff", (), (".arff",)),
    Format("parquet", "parquet", ("pq",), (".parquet", ".pq"), binary=True),
    Format("jsonl", "jsonl", ("ndjson", "jsonlines", "json-lines"), (".jsonl", ".ndjson")),
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
_BY_SPELLING: dict[str, Format] = {
    **{a: f for f in FORMATS for a in f.aliases}, "txt": BY_NAME["csv"],
    **BY_NAME,
}
NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)

# label, then index:value pairs (qid allowed), then an optional comment.
_SVMLIGHT_LINE = re.compile(
    r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?(\s+(qid:\S+|\d+:\S+))*\s*(#.*)?")
_SVMLIGHT_PAIR = re.compile(r"\s\d+:\S")
_SAMPLE_LINES = 20


def lookup(spelling: str, among: tuple[str, ...] = NAMES) -> Format:
    """The format a ``format`` option names (a name or an alias, any case, a leading dot
    allowed); IngestError (field "format") listing ``among`` for anything else."""
    key = spelling.strip().lower().lstrip(".") if isinstance(spelling, str) else None
    found = _BY_SPELLING.get(key) if key is not None else None
    if found is None or found.name not in among:
        raise IngestError(f"Unknown format {spelling!r}; use one of: {', '.join(among)}.",
                          field="format")
    return found


def by_extension(filename: str) -> Format | None:
    """The format the file name's extension means, if any."""
    name = PurePosixPath((filename or "").replace("\\", "/")).name.lower()
    for fmt in FORMATS:
        if any(name.endswith(ext) for ext in fmt.extensions):
            return fmt
    return None


def detect(head: bytes | str, filename: str = "", declared: str | None = None) -> Format:
    """The file's format: ``declared`` (a name or alias), else its extension, else its first
    bytes ``head`` (``SNIFF_BYTES`` of them are enough)."""
    if declared:
        return lookup(declared)
    return by_extension(filename) or by_content(head)


def by_content(head: bytes | str) -> Format:
    """The format the first bytes of a file show (see the module's docstring)."""
    if isinstance(head, bytes | bytearray | memoryview):
        head = bytes(head)
        if head.startswith(PARQUET_MAGIC):
            return BY_NAME["parquet"]
        text = head[:SNIFF_BYTES].decode("utf-8", errors="replace")
    else:
        text = head[:SNIFF_BYTES]
    sample: list[str] = []
    for line in text.lstrip("\ufeff").split("\n"):
        s = line.strip()
        if not s:
            continue
        if s[0] in "%@" and not sample:
            return BY_NAME["arff"]  # also KEEL .dat files, which use the same @ header
        if s[0] == "{" and not sample:
            return BY_NAME["jsonl"]
        if not s.startswith("#"):
            sample.append(s)
        if len(sample) >= _SAMPLE_LINES:
            break
    if sample and all(_SVMLIGHT_LINE.fullmatch(s) for s in sample) and any(
            _SVMLIGHT_PAIR.search(s) for s in sample):
        return BY_NAME["svmlight"]
    first = sample[0] if sample else ""
    if "\t" in first:
        return BY_NAME["tsv"]
    if "," in first or ";" in first:
        return BY_NAME["csv"]
    return BY_NAME["whitespace"] if len(first.split()) > 1 else BY_NAME["csv"]
