"""Which format a file is in: the `format` option, else its extension, else its content."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .errors import IngestError

FORMATS = ("csv", "svmlight", "arff")
_ALIASES = {"csv": "csv", "tsv": "csv", "txt": "csv", "text": "csv",
            "svmlight": "svmlight", "libsvm": "svmlight", "svm": "svmlight",
            "arff": "arff"}
_BY_EXTENSION = {".arff": "arff", ".csv": "csv", ".tsv": "csv", ".svm": "svmlight",
                 ".libsvm": "svmlight", ".svmlight": "svmlight"}
# label, then index:value pairs (qid allowed), then an optional comment.
_SVMLIGHT_LINE = re.compile(
    r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?(\s+(qid:\S+|\d+:\S+))*\s*(#.*)?")
_SVMLIGHT_PAIR = re.compile(r"\s\d+:\S")


def normalize_format(fmt: str) -> str:
    key = fmt.strip().lower().lstrip(".") if isinstance(fmt, str) else None
    if key not in _ALIASES:
        raise IngestError(f"Unknown format {fmt!r}; use one of: csv, svmlight, arff.",
                          field="format")
    return _ALIASES[key]


def detect_format(text: str, filename: str = "") -> str:
    name = PurePosixPath((filename or "").replace("\\", "/")).name.lower()
    for ext, fmt in _BY_EXTENSION.items():
        if name.endswith(ext):
            return fmt
    sample: list[str] = []
    for line in text.split("\n"):
        s = line.strip()
        if not s or s.startswith("%"):
            continue
        if s.startswith("@"):
            return "arff"  # also KEEL .dat files, which use the same @ header
        if not s.startswith("#"):
            sample.append(s)
        if len(sample) >= 20:
            break
    if sample and all(_SVMLIGHT_LINE.fullmatch(s) for s in sample) and any(
            _SVMLIGHT_PAIR.search(s) for s in sample):
        return "svmlight"
    return "csv"
