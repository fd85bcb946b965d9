"""Making text safe as a cell of a CSV file opened in a spreadsheet, or of a Markdown table.

A data set's name is user input and becomes a table row name: ``=HYPERLINK(...)`` must not
become a live formula (CSV injection), and ``|`` or a newline must not break a Markdown row,
nor ``<script>``, ``<img onerror=…>`` or ``[text](url)`` become live HTML or a link where the
Markdown is rendered.
"""

from __future__ import annotations

import html
import math

#: first characters a spreadsheet reads as the start of a formula (OWASP's list)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def csv_cell(value: object) -> str:
    """``value`` as CSV cell text; text starting like a formula gets a leading ``'`` (numbers
    such as ``-0.5`` are kept as they are)."""
    text = str(value)
    if text.startswith(FORMULA_STARTS) and not _is_number(text):
        return "'" + text
    return text


#: Markdown punctuation that could start code, a link or an image, or end the cell (emphasis
#: is harmless and left alone: ``breast_cancer`` stays readable)
_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`[]|!"})


def markdown_cell(value: object) -> str:
    """``value`` as the literal text of one Markdown table cell: HTML's ``& < >`` as entities
    (a renderer shows them as typed, never as tags), ``\\ ` [ ] | !`` backslash-escaped,
    line breaks as spaces."""
    text = str(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return html.escape(text, quote=False).translate(_MARKDOWN_SPECIAL)
