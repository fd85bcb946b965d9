"""Bytes -> text, and the token rules shared by every format (missing values, numbers)."""

from __future__ import annotations

from .errors import IngestError

# Spellings of "no value" accepted in CSV cells (ARFF uses "?"; empty is missing everywhere).
MISSING_TOKENS = frozenset({"", "?", "NA", "NaN", "nan"})

# Magic numbers of files people upload by mistake instead of the text they hold.
_BINARY_MAGIC = {
    b"\x1f\x8b": "gzip-compressed",
    b"PK\x03\x04": "a zip archive (or an .xlsx/.ods spreadsheet)",
    b"\xd0\xcf\x11\xe0": "an old Excel/Office document",
    b"BZh": "bzip2-compressed",
}


def is_binary(head: bytes) -> bool:
    """Whether the file starting with ``head`` is not UTF-8 or legacy single-byte text:
    compressed, an Office document, or UTF-16 (decode_bytes explains which)."""
    return head.startswith((*_BINARY_MAGIC, b"\xff\xfe", b"\xfe\xff"))


def decode_bytes(content: bytes) -> str:
    """Decode an upload: UTF-8 (with or without BOM), UTF-16 with BOM, else cp1252/latin-1.

    Legacy single-byte encodings are common for CSV exported from spreadsheets, so a
    non-UTF-8 text file is read rather than rejected; genuinely binary content is rejected.
    """
    if not isinstance(content, bytes | bytearray | memoryview):
        raise IngestError("The upload must be bytes.", field="file")
    content = bytes(content)
    for magic, what in _BINARY_MAGIC.items():
        if content.startswith(magic):
            raise IngestError(
                f"The file looks {what}, not a text data file; upload the uncompressed "
                "CSV/TSV, ARFF or svmlight text.", field="file")
    if content.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return content.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise IngestError(f"The file has a UTF-16 byte-order mark but is not valid UTF-16 "
                              f"({exc.reason} at byte {exc.start}).", field="file") from None
    if b"\x00" in content:
        line = content.count(b"\n", 0, content.index(b"\x00")) + 1
        raise IngestError(
            f"The file contains NUL bytes (first on line {line}): it is binary or in an "
            "unsupported encoding; upload a UTF-8 text file.", field="file", row=line)
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        return content.decode("cp1252")
    except UnicodeDecodeError:
        # latin-1 maps every byte, so this cannot fail.
        return content.decode("latin-1")


def clean_token(token: str) -> str | None:
    """Strip a raw cell; None when it spells a missing value."""
    token = token.strip()
    if token in MISSING_TOKENS or (len(token) == 3 and token.lower() == "nan"):
        return None
    return token


def parse_number(token: str) -> float | None:
    """float(token), or None if the token is not a plain number.

    Python's float() also accepts "1_000" and surrounding junk-free words like "infinity";
    underscores are rejected because they are never numbers in data files.
    """
    if "_" in token:
        return None
    try:
        return float(token)
    except ValueError:
        return None


def is_number(token: str) -> bool:
    return parse_number(token) is not None


def preview(names: list[str], limit: int = 20) -> str:
    """A readable, bounded listing of names for error messages."""
    shown = ", ".join(repr(n) for n in names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names) - limit} more)"
    return shown
