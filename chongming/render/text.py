"""Terminal-safe text: escaping of invisible characters, and display width.

Labels, reasons and messages are user data. Printed raw, a control character
or an ANSI escape sequence can rewrite the operator's terminal, and a bidi
override (U+202E) can make ``evil.exe`` look like ``exe.live``. So every cell
goes through :func:`escape_text` first, which shows such characters as
Python-style escapes (``\\x1b``, ``\\u202e``). Backslashes themselves are left
alone: doubling them would garble Windows paths, and a literal ``\\x1b`` typed
into a label is harmless to a terminal.
"""

from __future__ import annotations

import unicodedata

__all__ = ["display_width", "escape_text"]

# Cc: C0, DEL, C1. Cf: bidi and other format characters. Zl/Zp: line and
# paragraph separators, which some terminals treat as newlines. Cs: lone
# surrogates, which cannot even be encoded for output.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_WIDE = frozenset({"W", "F"})
_ZERO_WIDTH_CATEGORIES = frozenset({"Mn", "Me"})


def escape_text(text: str) -> str:
    """``text`` with control, format and separator characters shown as escapes."""
    if text.isprintable():
        return text  # fast path: nothing in the escaped categories is printable
    return "".join(_escape_char(char) for char in text)


def display_width(text: str) -> int:
    """How many terminal cells ``text`` takes (East Asian wide characters take 2)."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if char.isascii():
            width += 1
        elif unicodedata.category(char) in _ZERO_WIDTH_CATEGORIES:
            continue
        elif unicodedata.east_asian_width(char) in _WIDE:
            width += 2
        else:
            width += 1
    return width


def _escape_char(char: str) -> str:
    if unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
